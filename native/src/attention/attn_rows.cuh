// The attention row kernel shared by the attention family (sdpa, sdpa_varlen) and the
// attention_decode family (sdpa_decode). Header-only so that each family builds on its own
// (PYGPUKIT_NATIVE_FAMILIES) and instantiates only its own modes.
//
// One warp per query row (Milakov & Gimelshein 2018, online softmax; the FlashAttention loop
// without tensor cores): lane l holds q and the output accumulator at dims l, l + 32, ... (NPER
// values each, D <= 32 * NPER), so a key's score is NPER FMAs per lane and one warp sum. Keys
// go in tiles of 32: lane t finds the address of key t of the tile (the block-table lookup of a
// paged cache happens once per key), the scores of the tile are computed key by key (lane t keeps
// score t), then the running max and sum are updated once per tile and each key's probability
// is broadcast to accumulate its V row. Every value is in the compute type (float, double for
// float64) and rounded once at the store, like the NumPy reference; nothing is rounded to the
// input dtype in between (the Triton kernel rounds p to v's dtype for its tensor-core p @ v).
// Warps of a block take the query heads of one kv head next to each other, so they read the same
// K/V rows at about the same time (L1 hits instead of separate L2 reads).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "attention/attention.h"
#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/paged.cuh"
#include "pygpukit_native/reduce.cuh"

namespace pgk {
namespace attn {

constexpr int kWarps = 4;  // rows (warps) per block
constexpr unsigned kFull = 0xffffffffu;

// pgk::ptr is host-only; kernels take the raw addresses inside their argument structs.
template <typename T>
__host__ __device__ inline T* dptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

__device__ inline float cexp(float v) { return expf(v); }
__device__ inline double cexp(double v) { return exp(v); }

__device__ inline std::int64_t shfl64(std::int64_t v, int src) {
  return static_cast<std::int64_t>(__shfl_sync(kFull, static_cast<long long>(v), src));
}

template <typename T, int NPER, int MODE>
__global__ void __launch_bounds__(kWarps * 32)
    rows_kernel(const AttnArgs a, typename Compute<T>::type scale) {
  using C = typename Compute<T>::type;
  const C neg_inf = -std::numeric_limits<C>::infinity();
  const int lane = threadIdx.x & 31;
  const std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const std::int64_t group = a.heads / a.kv_heads;
  if (w >= a.units * a.kv_heads * a.sq * group) return;  // the whole warp leaves together
  std::int64_t r = w;
  const std::int64_t g = r % group;
  r /= group;
  const std::int64_t i = r % a.sq;
  r /= a.sq;
  const std::int64_t hk = r % a.kv_heads;
  const std::int64_t b = r / a.kv_heads;
  const std::int64_t h = hk * group + g;

  std::int64_t lq = a.sq, lk = a.sk, qoff = 0, koff = 0;
  bool bad = false;  // decode: a length or block id outside the cache poisons the row
  if constexpr (MODE == static_cast<int>(AttnMode::varlen)) {
    const int* cq = dptr<const int>(a.cu_q);
    const int* ck = dptr<const int>(a.cu_k);
    qoff = cq[b * a.cu_q_stride];
    lq = cq[(b + 1) * a.cu_q_stride] - qoff;
    if (i >= lq) return;  // past this sequence's queries (max_seqlen_q sizes the grid)
    koff = ck[b * a.cu_k_stride];
    lk = ck[(b + 1) * a.cu_k_stride] - koff;
    if (lk < 0) lk = 0;
  }
  if constexpr (MODE == static_cast<int>(AttnMode::decode)) {
    lk = dptr<const int>(a.lens)[b * a.lens_stride];
    if (lk < 0 || lk > a.cap) {
      bad = true;
      lk = 0;
    }
  }
  // End-aligned causal mask: query i sees keys j <= i + lk - lq.
  std::int64_t kend = lk;
  if (a.causal && i + lk - lq + 1 < kend) kend = i + lk - lq + 1;

  const T* qp = dptr<const T>(a.q) + b * a.sq_s[0] + h * a.sq_s[1] + (qoff + i) * a.sq_s[2];
  T* op = dptr<T>(a.out) + b * a.so_s[0] + h * a.so_s[1] + (qoff + i) * a.so_s[2];
  const T* kp = dptr<const T>(a.k);
  const T* vp = dptr<const T>(a.v);
  const int d = static_cast<int>(a.d), dv = static_cast<int>(a.dv);

  C qr[NPER], acc[NPER];
#pragma unroll
  for (int e = 0; e < NPER; ++e) {
    const int dd = lane + 32 * e;
    qr[e] = dd < d ? to_compute(qp[dd * a.sq_s[3]]) : C(0);
    acc[e] = C(0);
  }
  C m = neg_inf, l = C(0);
  for (std::int64_t t0 = 0; t0 < kend; t0 += 32) {
    const std::int64_t j = t0 + lane;
    bool valid = j < kend;
    std::int64_t ko = 0, vo = 0;  // element offsets of key j's K and V rows
    if (valid) {
      std::int64_t blk = b, slot = koff + j;
      if constexpr (MODE == static_cast<int>(AttnMode::decode)) {
        if (a.block_table &&
            !paged_slot(a.block_table, a.bt_s0, a.bt_s1, a.page, a.nblocks, b, j, blk, slot)) {
          bad = true;
          valid = false;
          blk = 0;
        }
      }
      ko = kv_offset(a.sk_s, blk, hk, slot);
      vo = kv_offset(a.sv_s, blk, hk, slot);
    }
    const int nt = kend - t0 < 32 ? static_cast<int>(kend - t0) : 32;
    C mine = neg_inf;
    for (int t = 0; t < nt; ++t) {
      const std::int64_t kr = shfl64(ko, t);
      C part = C(0);
#pragma unroll
      for (int e = 0; e < NPER; ++e) {
        const int dd = lane + 32 * e;
        if (dd < d) part += qr[e] * to_compute(kp[kr + dd * a.sk_s[3]]);
      }
      const C s = warp_sum(part) * scale;
      if (lane == t) mine = s;
    }
    if (!valid) mine = neg_inf;
    const C tmax = warp_max(mine);
    if (tmax == neg_inf) continue;  // warp-uniform: every key of the tile was unreadable
    const C mnew = tmax > m ? tmax : m;
    const C corr = cexp(m - mnew);  // 0 on the first tile (m = -inf)
    const C p = valid ? cexp(mine - mnew) : C(0);
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int e = 0; e < NPER; ++e) acc[e] *= corr;
    for (int t = 0; t < nt; ++t) {
      const C pt = __shfl_sync(kFull, p, t);
      const std::int64_t vr = shfl64(vo, t);
#pragma unroll
      for (int e = 0; e < NPER; ++e) {
        const int dd = lane + 32 * e;
        if (dd < dv) acc[e] += pt * to_compute(vp[vr + dd * a.sv_s[3]]);
      }
    }
    m = mnew;
  }
  bad = __any_sync(kFull, bad);
#pragma unroll
  for (int e = 0; e < NPER; ++e) {
    const int dd = lane + 32 * e;
    if (dd < dv) {
      // A row that saw no key (l = 0) is zero, as in the reference.
      const C val = bad ? std::numeric_limits<C>::quiet_NaN() : (l > C(0) ? acc[e] / l : C(0));
      op[dd * a.so_s[3]] = from_compute<T>(val);
    }
  }
}

// Call f(std::integral_constant<int, NPER>) for the smallest bucket holding dmax dims.
template <typename F>
void with_nper(std::int64_t dmax, F&& f) {
  if (dmax <= 64) {
    f(std::integral_constant<int, 2>{});
  } else if (dmax <= 128) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

template <AttnMode MODE>
void launch_rows(const AttnArgs& a, const char* who) {
  PGK_REQUIRE_AS(who, a.units >= 0 && a.heads >= 0 && a.sq >= 0 && a.sk >= 0, "negative sizes");
  PGK_REQUIRE_AS(who, a.kv_heads > 0 && a.heads % a.kv_heads == 0,
                 "kv heads must divide the query heads");
  PGK_REQUIRE_AS(who, a.d >= 0 && a.d <= kMaxHeadDim && a.dv >= 0 && a.dv <= kMaxHeadDim,
                 "head dims must lie in [0, " + std::to_string(kMaxHeadDim) + "], got " +
                     std::to_string(a.d) + " and " + std::to_string(a.dv));
  const std::int64_t rows = a.units * a.heads * a.sq;
  if (rows == 0 || a.dv == 0) return;
  // k and v may be empty (no keys anywhere): only q and out are certainly read/written.
  PGK_REQUIRE_AS(who, a.q && a.out, "q and out must be device pointers");
  if (MODE == AttnMode::varlen) PGK_REQUIRE_AS(who, a.cu_q && a.cu_k, "varlen needs cu_seqlens");
  if (MODE == AttnMode::decode) {
    PGK_REQUIRE_AS(who, a.lens, "decode needs cache_seqlens");
    PGK_REQUIRE_AS(who, !a.block_table || (a.page > 0 && a.nblocks > 0),
                   "paged: page and nblocks > 0");
  }
  const std::int64_t blocks = (rows + kWarps - 1) / kWarps;
  PGK_REQUIRE_AS(who, blocks <= 0x7fffffff, "too many query rows for one launch");
  use_device(a.device);
  dispatch_float(a.dtype, who, [&](auto t) {
    using T = decltype(t);
    using C = typename Compute<T>::type;
    with_nper(a.d > a.dv ? a.d : a.dv, [&](auto n) {
      rows_kernel<T, decltype(n)::value, static_cast<int>(MODE)>
          <<<static_cast<unsigned>(blocks), kWarps * 32, 0, as_stream(a.stream)>>>(
              a, static_cast<C>(a.scale));
    });
  });
  PGK_CHECK_LAUNCH(who);
}

}  // namespace attn
}  // namespace pgk
