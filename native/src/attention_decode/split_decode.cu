// sdpa_decode on tensor cores with split keys (flash-decoding) for float16 / bfloat16 caches of
// head dim 64, 80, 96, 128 or 256 whose rows are 16-byte aligned; the other calls run the row
// kernel (attention/attn_rows.cuh). Numerics of the Triton twin (attention_decode.py): scores,
// softmax statistics and the accumulator in fp32, base-2 softmax with log2(e) folded into the
// scale, the probabilities rounded to v's dtype before p @ v, one rounding at the store.
//
// Work split. A block (4 warps) owns one (sequence, kv head, 16-row tile, key split); the rows of
// a tile are the GROUP query heads of the kv head times the Sq new tokens (row = g * Sq + i), so
// each K/V byte is read once per kv head and the rows fill mma's M = 16. Warp w takes the 16-key
// steps w, w + 4, ... of the split and runs its own online softmax and its own cp.async ring of
// STAGES steps in shared memory (no block barrier in the key loop); the four warps' (max, sum,
// accumulator) meet in shared memory at the end.
//
// Why a 16-key step: it is one mma k-step of p @ v and two n-tiles of q @ k^T, and it is the
// granule of a paged cache: when the page size is a multiple of 16, a step lies in one page and
// costs one block-table entry (read from shared memory, where the split's entries are loaded
// once at the start, right after the length: the split's first key depends on it). The
// addresses of a 16-slot page are those of 16 contiguous keys, so a paged cache streams like a
// contiguous one.
//
// Splits and the combine: the grid depends only on shapes; a split past its sequence's length
// exits at once, so the launch replays under a CUDA graph with new lengths. A sequence that fits
// one split writes its output directly. Otherwise each split writes its normalised fp32 partial
// and log2-sum-exp to the workspace, and the last split to arrive (an atomic counter per tile,
// fences around it: the CUTLASS semaphore pattern) combines them and resets the counter to 0 for
// the next launch. A length outside [0, cap] or a block id outside the cache makes the
// sequence's rows NaN and nothing out of bounds is read.
//
// Measured (H200, bf16 Hq32 Hkv8 D128, graph-timed; docs/benchmark-notes.md): 16-slot pages are
// within a few percent of the contiguous cache here, as designed, but the kernel is about 1.4x
// slower than the Triton kernel at batch 1 and 1.15-1.4x at batch 16, so the routing table keeps
// Triton first. Each warp runs its 16-key steps alone on its SM sub-partition (one block of 4
// warps per SM), so the chain of dependent mma, shuffle and exp2 latencies of a step is not
// hidden by other warps; that is the first thing to change.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "attention_decode/attention_decode.h"
#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/reduce.cuh"
#include "pygpukit_native/tensor_core.cuh"

namespace pgk {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;  // query rows of a tile (mma M)
constexpr int kStep = 16;  // keys of a warp step
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kMaxSplits = 1024;  // the combine's weights [splits][16] fit the ring
constexpr int kMaxDevices = 64;
constexpr int kStaticSmem = 64;  // the kernel's __shared__ flag, with room to spare

// Cache addressing: contiguous (block = batch entry), paged with pages of a multiple of 16 slots
// (one table entry per step), paged with other page sizes (one entry per key).
enum Paging : int { kContiguous = 0, kWholeSteps = 1, kPerKey = 2 };

template <int D>
struct Geo {
  // Shared row pitch: 16 bytes past D spreads the 8 rows of an ldmatrix over all banks.
  static constexpr int kPitch = D + 8;
  static constexpr int kSide = kStep * kPitch;        // one K (or V) step, elements
  static constexpr int kPerLane = kStep * D / 8 / 32;  // 16-byte copies of a side, per lane
};

template <typename T>
__device__ inline T* at(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Online softmax of one row's four scores of a step (already masked to -inf): the new max m,
// the factor c for the old sum and accumulator, the probabilities in place; returns their sum.
__device__ inline float softmax_step(float (&s)[4], float& m, float& c) {
  const float mnew = fmaxf(m, quad_max(fmaxf(fmaxf(s[0], s[1]), fmaxf(s[2], s[3]))));
  const float base = mnew == kNegInf ? 0.f : mnew;  // a row with no key yet: p = 0, c = 0
  c = exp2f(m - base);
  float sum = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    s[e] = exp2f(s[e] - base);
    sum += s[e];
  }
  m = mnew;
  return sum;
}

// Dynamic shared memory: the ring [warps][stages][K, V][16][pitch] T, then the split's table
// entries. After the key loop the ring is reused for the warps' statistics and accumulators,
// then for the combine's weights.
__host__ __device__ constexpr std::int64_t ring_bytes(int d, int stages, int elem) {
  return static_cast<std::int64_t>(kWarps) * stages * 2 * kStep * (d + 8) * elem;
}

template <typename T, int D, int S, int PAGING>
__global__ void __launch_bounds__(kThreads)
    split_decode_kernel(const AttnArgs a, const DecodeSplit sp, float scale2) {
  using G = Geo<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ring = reinterpret_cast<T*>(smem);
  int* table = reinterpret_cast<int*>(smem + ring_bytes(D, S, sizeof(T)));

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x;
  const std::int64_t tile = blockIdx.y % sp.tiles, hk = blockIdx.y / sp.tiles, b = blockIdx.z;
  const std::int64_t group = a.heads / a.kv_heads, rows = group * a.sq;

  // q fragments of the tile's rows g and g + 8 (zeros past the rows), for the whole head dim:
  // loaded before the length, so that the two latencies overlap.
  const T* qb = at<const T>(a.q) + b * a.sq_s[0];
  std::int64_t qrow[2], qpos[2];  // row offsets in q and the rows' token index (-1: none)
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2) {
    const std::int64_t r = tile * kRows + g + 8 * h2;
    qrow[h2] = 0;
    qpos[h2] = -1;
    if (r < rows) {
      const std::int64_t gh = r / a.sq;
      qpos[h2] = r % a.sq;
      qrow[h2] = (hk * group + gh) * a.sq_s[1] + qpos[h2] * a.sq_s[2];
    }
  }
  std::uint32_t qf[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      const int h2 = f & 1, col = ks * 16 + 2 * t + 8 * (f >> 1);
      std::uint32_t v = 0;
      if (qpos[h2] >= 0) {
        const T* p = qb + qrow[h2] + col * a.sq_s[3];
        v = static_cast<std::uint32_t>(Mma<T>::bits(p[0])) |
            (static_cast<std::uint32_t>(Mma<T>::bits(p[a.sq_s[3]])) << 16);
      }
      qf[ks][f] = v;
    }
  }

  std::int64_t len = at<const int>(a.lens)[b * a.lens_stride];
  const bool bad_len = len < 0 || len > a.cap;
  if (bad_len) len = 0;
  // Keys of this launch's splits for this length: its 16-key steps spread over the splits,
  // within [floor, chunk] (scratch.split_chunk mirrors it, with no one-split reach), so a
  // sequence far shorter than the cache still uses every split.
  const std::int64_t len_steps = (len + kStep - 1) / kStep;
  const std::int64_t spread = (len_steps + sp.splits - 1) / sp.splits * kStep;
  const std::int64_t keys =
      spread > sp.floor ? (spread < sp.chunk ? spread : sp.chunk) : sp.floor;
  const std::int64_t nact = len > keys ? (len + keys - 1) / keys : 1;
  if (split >= nact) return;  // block-uniform
  const std::int64_t lo = static_cast<std::int64_t>(split) * keys;
  const std::int64_t hi = lo + keys < len ? lo + keys : len;

  // The split's table entries (the split's start depends on the length, so they follow it):
  // every entry of a page below the table's width is a readable address.
  std::int64_t first = 0;
  if constexpr (PAGING != kContiguous) {
    first = lo / a.page;
    const std::int64_t width = a.cap / a.page;
    for (std::int64_t e = tid; e < sp.entries && first + e < width; e += kThreads) {
      table[e] = at<const int>(a.block_table)[b * a.bt_s0 + (first + e) * a.bt_s1];
    }
  }

  bool bad = bad_len;
  if constexpr (PAGING != kContiguous) {
    // Entries of pages holding keys below hi must name a block of the cache; the others are
    // never used. A bad one poisons the sequence and is replaced by 0 (never read out of bounds).
    // Each thread checks the entries it loaded; the barrier publishes the table to the warps.
    bool bad_entry = false;
    for (std::int64_t e = tid; e < sp.entries && (first + e) * a.page < hi; e += kThreads) {
      const int id = table[e];
      if (id < 0 || id >= a.nblocks) {
        table[e] = 0;
        bad_entry = true;
      }
    }
    bad = __syncthreads_or(bad_entry) != 0 || bad;
  }

  std::int64_t limit[2];  // keys row g (+ 8) sees: < len, and end-aligned causal
#pragma unroll
  for (int h2 = 0; h2 < 2; ++h2) {
    limit[h2] = qpos[h2] < 0 ? 0 : len;
    if (qpos[h2] >= 0 && a.causal && qpos[h2] + len - a.sq + 1 < len) {
      limit[h2] = qpos[h2] + len - a.sq + 1;
    }
  }

  const T* kc = at<const T>(a.k) + hk * a.sk_s[1];
  const T* vc = at<const T>(a.v) + hk * a.sv_s[1];
  T* my_ring = ring + static_cast<std::int64_t>(warp) * S * 2 * G::kSide;
  const std::int64_t steps = (hi - lo + kStep - 1) / kStep;

  // Copies of step j of this warp into ring slot j % S (keys past hi zero-filled, not read).
  auto issue = [&](std::int64_t j) {
    const std::int64_t s0 = lo + (j * kWarps + warp) * kStep;
    T* ks = my_ring + (j % S) * 2 * G::kSide;
    T* vs = ks + G::kSide;
    std::int64_t kstep = 0, vstep = 0;  // element offsets of the step's first key (whole steps)
    if constexpr (PAGING == kContiguous) {
      kstep = b * a.sk_s[0] + s0 * a.sk_s[2];
      vstep = b * a.sv_s[0] + s0 * a.sv_s[2];
    } else if constexpr (PAGING == kWholeSteps) {
      const std::int64_t pg = s0 / a.page;
      const std::int64_t blk = s0 < hi ? table[pg - first] : 0;
      kstep = blk * a.sk_s[0] + (s0 - pg * a.page) * a.sk_s[2];
      vstep = blk * a.sv_s[0] + (s0 - pg * a.page) * a.sv_s[2];
    }
#pragma unroll
    for (int c = 0; c < G::kPerLane; ++c) {
      const int chunk = lane + 32 * c;
      const int key = chunk / (D / 8), part = chunk % (D / 8);
      const std::int64_t pos = s0 + key;
      const bool ok = pos < hi;
      std::int64_t ko = kstep + key * a.sk_s[2], vo = vstep + key * a.sv_s[2];
      if constexpr (PAGING == kPerKey) {
        const std::int64_t pg = pos / a.page;
        const std::int64_t blk = ok ? table[pg - first] : 0;
        ko = blk * a.sk_s[0] + (pos - pg * a.page) * a.sk_s[2];
        vo = blk * a.sv_s[0] + (pos - pg * a.page) * a.sv_s[2];
      }
      cp_async16(ks + key * G::kPitch + part * 8, ok ? kc + ko + part * 8 : kc, ok);
      cp_async16(vs + key * G::kPitch + part * 8, ok ? vc + vo + part * 8 : vc, ok);
    }
  };

  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  const std::int64_t mine = steps > warp ? (steps - warp + kWarps - 1) / kWarps : 0;
  // S steps in flight from the start (a short split is requested whole at once); a slot is
  // refilled right after it is computed.
#pragma unroll
  for (int j = 0; j < S; ++j) {
    if (j < mine) issue(j);
    cp_async_commit();  // empty groups keep the wait count uniform
  }
  // ldmatrix row addresses of this lane: K non-transposed (matrix q = lane / 8 is keys
  // 8 (q / 2).., dims 8 (q % 2)..), V transposed (keys 8 (q % 2).., dims 8 (q / 2)..).
  const int mq = lane >> 3, mr = lane & 7;
  const int k_off = ((mq >> 1) * 8 + mr) * G::kPitch + (mq & 1) * 8;
  const int v_off = ((mq & 1) * 8 + mr) * G::kPitch + (mq >> 1) * 8;
  for (std::int64_t j = 0; j < mine; ++j) {
    cp_async_wait<S - 1>();  // step j's group has landed (S + j committed so far)
    __syncwarp();
    const T* ks = my_ring + (j % S) * 2 * G::kSide;
    const T* vs = ks + G::kSide;

    float s[2][4] = {};  // keys nt*8 + 2t (+1) of rows g (0, 1) and g + 8 (2, 3)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t bk[4];
      ldmatrix_x4<false>(bk, ks + k_off + kk * 16);
      Mma<T>::run(s[0], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], bk[0], bk[1]);
      Mma<T>::run(s[1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], bk[2], bk[3]);
    }
    const std::int64_t s0 = lo + (j * kWarps + warp) * kStep;
    float r0[4], r1[4];  // row g's and row g + 8's scores, log2 domain, masked
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::int64_t key = s0 + nt * 8 + 2 * t + e;
        r0[nt * 2 + e] = key < limit[0] ? s[nt][e] * scale2 : kNegInf;
        r1[nt * 2 + e] = key < limit[1] ? s[nt][2 + e] * scale2 : kNegInf;
      }
    }
    float c0, c1;
    const float p0 = softmax_step(r0, m[0], c0);
    const float p1 = softmax_step(r1, m[1], c1);
    l[0] = l[0] * c0 + p0;
    l[1] = l[1] * c1 + p1;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= c0;
      o[n][1] *= c0;
      o[n][2] *= c1;
      o[n][3] *= c1;
    }
    // The score fragments of the two key tiles are the A fragment of p (16 rows x 16 keys).
    const std::uint32_t pa0 = Mma<T>::pack(r0[0], r0[1]), pa1 = Mma<T>::pack(r1[0], r1[1]);
    const std::uint32_t pa2 = Mma<T>::pack(r0[2], r0[3]), pa3 = Mma<T>::pack(r1[2], r1[3]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t bv[4];
      ldmatrix_x4<true>(bv, vs + v_off + dp * 16);
      Mma<T>::run(o[2 * dp], pa0, pa1, pa2, pa3, bv[0], bv[1]);
      Mma<T>::run(o[2 * dp + 1], pa0, pa1, pa2, pa3, bv[2], bv[3]);
    }
    __syncwarp();  // every lane is done with this slot before issue() refills it
    if (j + S < mine) issue(j + S);
    cp_async_commit();
  }
  cp_async_wait<0>();
  l[0] = quad_sum(l[0]);
  l[1] = quad_sum(l[1]);
  __syncthreads();  // every warp has left its ring: it becomes the merge buffer

  // Merge the warps: statistics [warps][16] (max, sum), accumulators [warps][16][D] fp32.
  float* red_m = reinterpret_cast<float*>(smem);
  float* red_l = red_m + kWarps * kRows;
  float* red_o = red_l + kWarps * kRows;
  if (t == 0) {
    red_m[warp * kRows + g] = m[0];
    red_m[warp * kRows + g + 8] = m[1];
    red_l[warp * kRows + g] = l[0];
    red_l[warp * kRows + g + 8] = l[1];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    float* row0 = red_o + (warp * kRows + g) * D + n * 8 + 2 * t;
    row0[0] = o[n][0];
    row0[1] = o[n][1];
    row0[8 * D] = o[n][2];
    row0[8 * D + 1] = o[n][3];
  }
  __syncthreads();

  const std::int64_t unit = (b * a.kv_heads + hk) * sp.tiles + tile;  // workspace tile index
  const std::int64_t base_row = tile * kRows;
  const int nrows = static_cast<int>(rows - base_row < kRows ? rows - base_row : kRows);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  T* out = at<T>(a.out) + b * a.so_s[0];
  auto out_at = [&](int r, int d) -> T& {
    const std::int64_t gr = base_row + r, gh = gr / a.sq, i = gr % a.sq;
    return out[(hk * group + gh) * a.so_s[1] + i * a.so_s[2] + d * a.so_s[3]];
  };
  float* parts = at<float>(sp.parts) + (unit * sp.splits + split) * kRows * D;
  float* lses = at<float>(sp.lse) + (unit * sp.splits + split) * kRows;
  for (int idx = tid; idx < nrows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    float mx = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * kRows + r]);
    float sum = 0.f, acc = 0.f;
    if (mx != kNegInf) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(red_m[w * kRows + r] - mx);
        sum += f * red_l[w * kRows + r];
        acc += f * red_o[(w * kRows + r) * D + d];
      }
    }
    const float val = sum > 0.f ? acc / sum : 0.f;  // a row that saw no key is zero
    if (nact == 1) {
      out_at(r, d) = from_compute<T>(bad ? nan : val);
    } else {
      parts[r * D + d] = val;
      if (d == 0) lses[r] = bad ? nan : (sum > 0.f ? mx + log2f(sum) : kNegInf);
    }
  }
  if (nact == 1) return;

  // The last split of this tile to arrive combines the partials.
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    int* cnt = at<int>(sp.counters) + unit;
    last = atomicAdd(cnt, 1) == nact - 1;
    if (last) *cnt = 0;  // every split of this launch has arrived: ready for the next one
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int ns = static_cast<int>(nact);
  float* wgt = reinterpret_cast<float*>(smem);  // [ns][16] weights of the partials
  const float* all_parts = at<const float>(sp.parts) + unit * sp.splits * kRows * D;
  const float* all_lse = at<const float>(sp.lse) + unit * sp.splits * kRows;
  for (int idx = tid; idx < ns * kRows; idx += kThreads) wgt[idx] = __ldcg(all_lse + idx);
  __syncthreads();
  // A warp per row, lanes over the splits: the weights exp2(lse - max) / sum in place.
  for (int r = warp; r < nrows; r += kWarps) {
    float mx = kNegInf;
    bool poisoned = false;
    for (int s2 = lane; s2 < ns; s2 += 32) {
      const float v = wgt[s2 * kRows + r];
      poisoned = poisoned || isnan(v);
      mx = fmaxf(mx, v);
    }
    poisoned = __any_sync(0xffffffffu, poisoned);
    mx = warp_max(mx);
    float sum = 0.f;
    if (mx != kNegInf) {
      for (int s2 = lane; s2 < ns; s2 += 32) sum += exp2f(wgt[s2 * kRows + r] - mx);
    }
    sum = warp_sum(sum);
    for (int s2 = lane; s2 < ns; s2 += 32) {
      float& w = wgt[s2 * kRows + r];
      w = poisoned ? nan : (sum > 0.f ? exp2f(w - mx) / sum : 0.f);
    }
  }
  __syncthreads();
  // The partials of an output element, kBatch loads in flight at a time (a loop of one load per
  // split waits out an L2 round trip per split: 16 splits cost about 8 us).
  constexpr int kBatch = 8;
  for (int idx = tid; idx < nrows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const float* pr = all_parts + r * D + d;
    float acc = 0.f;
    int s2 = 0;
    for (; s2 + kBatch <= ns; s2 += kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = __ldcg(pr + (s2 + u) * kRows * D);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += wgt[(s2 + u) * kRows + r] * v[u];
    }
    for (; s2 < ns; ++s2) acc += wgt[s2 * kRows + r] * __ldcg(pr + s2 * kRows * D);
    out_at(r, d) = from_compute<T>(acc);
  }
}

bool aligned16(std::uintptr_t p) { return p % 16 == 0; }

// Largest dynamic shared memory a block may opt into on device dev (cached).
int smem_optin(int dev) {
  static int cached[kMaxDevices] = {};
  if (cached[dev] == 0) {
    PGK_CHECK(cudaDeviceGetAttribute(&cached[dev], cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  }
  return cached[dev];
}

template <typename T, int D, int S, int PAGING>
void launch_paging(const AttnArgs& a, const DecodeSplit& sp) {
  const std::int64_t bytes =
      ring_bytes(D, S, sizeof(T)) + (PAGING == kContiguous ? 0 : sp.entries * 4);
  const float scale2 = static_cast<float>(a.scale * 1.4426950408889634);
  const dim3 grid(static_cast<unsigned>(sp.splits),
                  static_cast<unsigned>(a.kv_heads * sp.tiles), static_cast<unsigned>(a.units));
  // The opt-in above 48 KiB, raised to this launch's size when it grows (per kernel and device;
  // the opt-in does not change occupancy: the launch's own size does). The opt-in excludes the
  // kernel's static shared memory, which sdpa_decode_split's check has reserved.
  static std::int64_t opted[kMaxDevices] = {};
  if (bytes > opted[a.device]) {
    PGK_CHECK(cudaFuncSetAttribute(split_decode_kernel<T, D, S, PAGING>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(bytes)));
    opted[a.device] = bytes;
  }
  split_decode_kernel<T, D, S, PAGING>
      <<<grid, kThreads, static_cast<std::size_t>(bytes), as_stream(a.stream)>>>(a, sp, scale2);
}

template <typename T, int D, int S>
void launch_stages(const AttnArgs& a, const DecodeSplit& sp, int paging) {
  switch (paging) {
    case kContiguous:
      launch_paging<T, D, S, kContiguous>(a, sp);
      break;
    case kWholeSteps:
      launch_paging<T, D, S, kWholeSteps>(a, sp);
      break;
    default:
      launch_paging<T, D, S, kPerKey>(a, sp);
  }
}

// Rings of 3 or 4 steps a warp for D <= 128 (two blocks or one per SM), 2 for D = 256.
template <typename T, int D>
void launch_split(const AttnArgs& a, const DecodeSplit& sp, int paging) {
  if constexpr (D > 128) {
    launch_stages<T, D, 2>(a, sp, paging);
  } else if (sp.stages == 3) {
    launch_stages<T, D, 3>(a, sp, paging);
  } else {
    launch_stages<T, D, 4>(a, sp, paging);
  }
}

template <typename T>
void launch_dim(const AttnArgs& a, const DecodeSplit& sp, int paging) {
  switch (a.d) {
    case 64:
      launch_split<T, 64>(a, sp, paging);
      break;
    case 80:
      launch_split<T, 80>(a, sp, paging);
      break;
    case 96:
      launch_split<T, 96>(a, sp, paging);
      break;
    case 128:
      launch_split<T, 128>(a, sp, paging);
      break;
    default:
      launch_split<T, 256>(a, sp, paging);
  }
}

}  // namespace

std::int64_t split_decode_smem(std::int64_t d, int elem, std::int64_t entries, int stages) {
  return ring_bytes(static_cast<int>(d), stages, elem) + entries * 4 + kStaticSmem;
}

void sdpa_decode_split(const AttnArgs& a, const DecodeSplit& sp) {
  const char* who = "sdpa_decode";
  PGK_REQUIRE_AS(who, a.mode == AttnMode::decode, "sdpa_decode_split takes decode-mode arguments");
  PGK_REQUIRE_AS(who, a.dtype == DType::f16 || a.dtype == DType::bf16,
                 "the split kernel takes float16 or bfloat16");
  PGK_REQUIRE_AS(who, a.d == a.dv && (a.d == 64 || a.d == 80 || a.d == 96 || a.d == 128 ||
                                      a.d == 256),
                 "the split kernel takes head dim 64, 80, 96, 128 or 256, got " +
                     std::to_string(a.d));
  PGK_REQUIRE_AS(who, a.units > 0 && a.units <= 65535 && a.kv_heads > 0 && a.sq > 0 &&
                          a.heads % a.kv_heads == 0,
                 "batch must lie in [1, 65535], kv heads must divide the query heads");
  const std::int64_t rows = a.heads / a.kv_heads * a.sq;
  PGK_REQUIRE_AS(who, sp.tiles == (rows + kRows - 1) / kRows && a.kv_heads * sp.tiles <= 65535,
                 "tiles must be ceil(heads / kv_heads * sq / 16) and kv_heads * tiles <= 65535");
  PGK_REQUIRE_AS(who, sp.splits >= 1 && sp.splits <= kMaxSplits && sp.chunk > 0 &&
                          sp.chunk % kStep == 0 && sp.splits * sp.chunk >= a.cap,
                 "splits must lie in [1, 1024] and splits * chunk cover the cache (chunk a "
                 "multiple of 16)");
  PGK_REQUIRE_AS(who, sp.floor > 0 && sp.floor <= sp.chunk && sp.floor % kStep == 0,
                 "floor must be a multiple of 16 in [16, chunk]");
  PGK_REQUIRE_AS(who, a.sk_s[3] == 1 && a.sv_s[3] == 1 && aligned16(a.k) && aligned16(a.v),
                 "the split kernel needs unit-stride head dims and 16-byte aligned caches");
  for (int i = 0; i < 3; ++i) {
    PGK_REQUIRE_AS(who, a.sk_s[i] % 8 == 0 && a.sv_s[i] % 8 == 0,
                   "the split kernel needs cache strides of whole 16-byte rows");
  }
  PGK_REQUIRE_AS(who, a.q && a.out && a.lens, "q, out and cache_seqlens must be device pointers");
  PGK_REQUIRE_AS(who, sp.splits == 1 || (sp.parts && sp.lse && sp.counters),
                 "more than one split needs the workspace (parts, lse, counters)");
  int paging = kContiguous;
  if (a.block_table) {
    PGK_REQUIRE_AS(who, a.page > 0 && a.nblocks > 0, "paged: page and nblocks > 0");
    paging = a.page % kStep == 0 ? kWholeSteps : kPerKey;
    PGK_REQUIRE_AS(who, sp.entries >= sp.chunk / a.page + 2,
                   "entries must hold a split's table entries (chunk / page + 2)");
  }
  PGK_REQUIRE_AS(who, a.d <= 128 ? (sp.stages == 3 || sp.stages == 4) : sp.stages == 2,
                 "stages must be 3 or 4 (head dim <= 128) or 2 (256)");
  const std::int64_t bytes =
      split_decode_smem(a.d, 2, paging == kContiguous ? 0 : sp.entries, static_cast<int>(sp.stages));
  PGK_REQUIRE_AS(who, a.device >= 0 && a.device < kMaxDevices, "device index out of range");
  use_device(a.device);
  PGK_REQUIRE_AS(who, bytes <= smem_optin(a.device),
                 "the split kernel needs " + std::to_string(bytes) +
                     " bytes of shared memory, more than this device's " +
                     std::to_string(smem_optin(a.device)));
  if (a.dtype == DType::f16) {
    launch_dim<__half>(a, sp, paging);
  } else {
    launch_dim<__nv_bfloat16>(a, sp, paging);
  }
  PGK_CHECK_LAUNCH(who);
}

}  // namespace pgk
