// The streaming kernel of dense weights (gemv_bf16.cu; the quantized formats use gemv_wa.cuh,
// and take from here the shared pieces: Params, Ops, the epilogue, the checks): tensor-core
// mma.sync m16n8k16 (fp32 accumulate) on operands built in registers, W read exactly once.
//
// Work split. A block owns kTileN = 16 output columns (two n-tiles of 8) and one 16-row tile of
// x (grid.y walks M). Its warps split K: W is cut into granules of 16 bytes along each row (8
// values); a warp-step is 4 consecutive granules of the same rows, one per
// thread t = lane % 4, and warp w takes super-steps (Unroll warp-steps, see Config) w, w + nwarps,
// ... The next super-step's W loads (Unroll * kTiles of 16 bytes a thread) are issued before the
// current one is computed, so they are in flight during the math. Partial sums meet in shared
// memory in a fixed warp order (deterministic), then one rounding at the store.
//
// Fragment mapping (PTX ISA, mma.m16n8k16 .bf16/.f16): lane = 4 g + t holds B (= W^T) column
// n = g of each n-tile and A (= x) rows g and g + 8; its k-slots are {2t, 2t+1} (b0, a0, a1) and
// {2t+8, 2t+9} (b1, a2, a3); C entries c0..c3 are (row g, col 2t), (g, 2t+1), (g+8, 2t),
// (g+8, 2t+1). The dot product does not care which k sits in which k-slot as long as A and B
// agree, so thread t's k-slots are filled from ITS OWN granule (k contiguous in memory, one
// 16-byte load for W and for each x row) in whatever pairing the dequantizer produces cheaply;
// the format's step() builds the matching x pairs. Rows of x past M and columns past N are
// loaded as zeros and never stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "gemv/gemv.h"
#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/pdl.cuh"
#include "pygpukit_native/sigmoid.cuh"
#include "pygpukit_native/tensor_core.cuh"

namespace pgk {
namespace gemv_detail {

constexpr int kTiles = 2;           // n-tiles of 8 columns per block
constexpr int kTileN = 8 * kTiles;  // output columns per block
constexpr int kTileM = 16;          // rows of x per block

struct Params {
  const void* x;
  std::int64_t sx;  // x row stride, elements
  const unsigned char* w;
  std::int64_t sw;  // W row stride, bytes
  const void* scales;
  std::int64_t ss;  // scale row stride, elements
  const void* bias;
  void* y;
  std::int64_t m, n, k;
  float gscale;
  bool pdl;       // launched early: wait on the kernel ahead before reading x (GemvArgs::pdl)
  bool prefetch;  // constant W: its first loads go before that wait (GemvArgs::prefetch)
  // The RMSNorm read in (GemvArgs::norm; gemv_wa.cuh's Norm instantiations only).
  const void* norm_w;
  const void* residual;
  void* h;
  float eps;
};

// The start of every gemv kernel: with p.pdl, wait on the kernel ahead and release the one
// after; `weights` issues the first loads of W (and its scales), before the wait where W is
// constant (p.prefetch), else after it. Nothing else is read before the wait.
template <typename LoadW>
__device__ __forceinline__ void start(const Params& p, LoadW&& weights) {
  if (p.pdl && !p.prefetch) {
    pdl_wait();
    pdl_release();
  }
  weights();  // one copy of the loads (two copies cost registers)
  if (p.prefetch) {  // implies p.pdl (make_params)
    pdl_wait();
    pdl_release();
  }
}

// The thread's view of its block: x rows g and g + 8 of the block's tile (nullptr past M).
template <typename T>
struct Ctx {
  const T* xa;
  const T* xb;
  std::int64_t granules;  // 16-byte granules per W row
  std::int64_t steps;     // warp-steps (4 granules each) per W row
  int t, g;
};

// W is read once: no L1 allocation, 256-byte L2 prefetch (each row is walked in >= 64-byte runs).
__device__ __forceinline__ uint4 ld_w(const unsigned char* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// x is small and read by every block: the default (L1-cached) read-only path.
template <typename T>
__device__ __forceinline__ uint4 ld_x(const T* row, std::int64_t k, bool ok) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (ok && row != nullptr) v = __ldg(reinterpret_cast<const uint4*>(row + k));
  return v;
}

__device__ __forceinline__ std::uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}

constexpr std::uint32_t kNegZero2 = 0x80008000u;  // (-0, -0): the addend of a pure product

template <typename T>
struct Ops;

template <>
struct Ops<__nv_bfloat16> {
  static constexpr std::uint32_t kE4M3Rebias = 0x7B807B80u;  // 2^120 = 2^(127 - 7)

  __device__ static std::uint32_t fma2(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    std::uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  __device__ static void mma(float* c, std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                             std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
    Mma<__nv_bfloat16>::run(c, a0, a1, a2, a3, b0, b1);
  }
  // Two e4m3 codes at bits 15..8 and 31..24 (zeros elsewhere) -> bf16x2, exactly: sign in
  // place, exponent+mantissa shifted into bf16's low exponent bits, then x 2^120 rebiases the
  // exponent (subnormal codes land on bf16 subnormals, which the product scales exactly).
  __device__ static std::uint32_t e4m3_spread(std::uint32_t w) {
    return fma2((w & 0x80008000u) | ((w >> 4) & 0x07F007F0u), kE4M3Rebias, kNegZero2);
  }
  // Codes of bytes 0..3 of q -> (b0, b1) and (b2, b3) as bf16x2.
  __device__ static void e4m3x4(std::uint32_t q, std::uint32_t& lo, std::uint32_t& hi) {
    lo = e4m3_spread(__byte_perm(q, 0u, 0x1404));
    hi = e4m3_spread(__byte_perm(q, 0u, 0x3424));
  }
  // The code of byte K of w in both halves (one PRMT places it, zeros beside it).
  template <int K>
  __device__ static std::uint32_t e4m3_bcast_byte(std::uint32_t w) {
    static_assert(K >= 0 && K < 4, "a word has bytes 0..3");
    return e4m3_spread(__byte_perm(w, 0u, 0x0404u + 0x1010u * K));
  }
};

template <>
struct Ops<__half> {

  __device__ static std::uint32_t fma2(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    std::uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  __device__ static void mma(float* c, std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                             std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
    Mma<__half>::run(c, a0, a1, a2, a3, b0, b1);
  }
  static constexpr std::uint32_t kE4M3Rebias = 0x5C005C00u;  // 2^8 = 2^(15 - 7)

  // Every e4m3 value is a float16 value. sm_89+: cuda_fp8.h's conversion, one
  // cvt.rn.f16x2.e4m3x2. Before: the bf16 trick with f16's field widths (codes at bits 15..8
  // and 31..24, exponent+mantissa shifted into f16's low exponent bits, x 2^8), exact and
  // without the library's software path (which spills on sm_86).
  __device__ static std::uint32_t e4m3_spread(std::uint32_t w) {
    return fma2((w & 0x80008000u) | ((w >> 1) & 0x3F803F80u), kE4M3Rebias, kNegZero2);
  }
  __device__ static std::uint32_t e4m3x2(std::uint32_t pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(pair & 0xFFFFu), __NV_E4M3);
    return static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
#else
    return e4m3_spread(__byte_perm(pair, 0u, 0x1404));
#endif
  }
  __device__ static void e4m3x4(std::uint32_t q, std::uint32_t& lo, std::uint32_t& hi) {
    lo = e4m3x2(q);
    hi = e4m3x2(q >> 16);
  }
  // The code of byte K of w in both bytes of the low half (what e4m3x2 converts).
  template <int K>
  __device__ static std::uint32_t e4m3_bcast_byte(std::uint32_t w) {
    static_assert(K >= 0 && K < 4, "a word has bytes 0..3");
    return e4m3x2(__byte_perm(w, 0u, 0x0011u * K));
  }
};

// Loads the W granules of super-step s. Steps past the end load zeros without touching memory.
template <typename T, int U>
__device__ __forceinline__ void load_super(const Ctx<T>& c,
                                           const unsigned char* const (&wrow)[kTiles],
                                           const bool (&wok)[kTiles], std::int64_t s,
                                           uint4 (&buf)[U][kTiles]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::int64_t gi = (s * U + u) * 4 + c.t;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      buf[u][j] = make_uint4(0u, 0u, 0u, 0u);
      if (wok[j] && gi < c.granules) buf[u][j] = ld_w(wrow[j] + gi * 16);
    }
  }
}

// The end of every gemv kernel (this one and gemv_wa.cuh's): each warp's accumulators go to
// shared memory, then one thread per output value adds the warps' partial sums in a fixed warp
// order (deterministic), applies the format's finish (scales that do not vary along K), adds
// the bias in fp32 and rounds once at the store. What differs between the kernels is only the
// shape of acc (its values, flattened row-major, are value i of each lane) and where value i of
// lane l lands in y: at(i, l, m, n) sets its row m and column n (W is the B operand of the mma
// here, the A operand in gemv_wa.cuh, so C's rows are x rows in one and W rows in the other).
// kWarps: the warps of a block of the kernel (sizes the reduction buffer). The kernels'
// at captures m0 and n0 by value: capturing them by reference changed gemv_kernel's SASS.
// kUp != 0: the gated product (gemv_wa.cuh; W's n rows are gate rows, then up rows): value
// i + kUp of the same lane is the up row's sum of the output column whose gate row's sum is
// value i; at gives the gate value its column n < I = p.n / 2 and the up value n >= I
// (skipped: its gate value's thread reads it), and the store is silu(g) * u.
template <typename T, typename F, int kWarps, int kUp = 0, typename Acc, typename At>
__device__ __forceinline__ void epilogue(const Params& p, const Acc& acc, At at) {
  static_assert(std::is_same_v<std::remove_all_extents_t<Acc>, float>, "fp32 accumulators");
  constexpr int kVals = sizeof(Acc) / sizeof(float);
  const float* vals = reinterpret_cast<const float*>(&acc);
  __shared__ float red[kWarps][kVals][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int i = 0; i < kVals; ++i) red[warp][i][lane] = vals[i];
  __syncthreads();
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  constexpr bool gated = kUp != 0;
  const std::int64_t ny = gated ? p.n / 2 : p.n;  // columns of y
  for (int idx = threadIdx.x; idx < kVals * 32; idx += blockDim.x) {
    const int i = idx >> 5, l = idx & 31;
    float v = 0.f;
    for (int w = 0; w < nwarps; ++w) v += red[w][i][l];
    std::int64_t m, n;
    at(i, l, m, n);
    if (m < p.m && n < ny) {
      v = F::finish(p, v, n);
      if constexpr (gated) {
        float u = 0.f;
        for (int w = 0; w < nwarps; ++w) u += red[w][i + kUp][l];
        u = F::finish(p, u, n + ny);
        v = v * sigmoid_c(v) * u;  // the activation family's silu(g) * u
      } else if (bias != nullptr) {
        v += to_compute(bias[n]);
      }
      y[m * ny + n] = from_compute<T>(v);
    }
  }
}

// A launch configuration: Warps warps a block splitting K, Unroll warp-steps a super-step (the
// loads of one super-step are in flight while the one before is computed), MinBlocks the blocks
// a multiprocessor must hold (__launch_bounds__; 0: no register cap).
template <int Warps_, int Unroll_, int MinBlocks_ = 0>
struct Config {
  static constexpr int Warps = Warps_, Unroll = Unroll_, MinBlocks = MinBlocks_;
};

template <typename T, typename F, typename C>
__global__ void __launch_bounds__(C::Warps * 32, C::MinBlocks) gemv_kernel(const Params p) {
  constexpr int U = C::Unroll, nwarps = C::Warps;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * kTileN;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * kTileM;
  Ctx<T> c;
  c.g = lane >> 2;
  c.t = lane & 3;
  c.granules = p.k / F::kElems;
  const T* x = static_cast<const T*>(p.x);
  c.xa = m0 + c.g < p.m ? x + (m0 + c.g) * p.sx : nullptr;
  c.xb = m0 + c.g + 8 < p.m ? x + (m0 + c.g + 8) * p.sx : nullptr;
  const unsigned char* wrow[kTiles];
  bool wok[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const std::int64_t n = n0 + 8 * j + c.g;
    wok[j] = n < p.n;
    wrow[j] = p.w + (wok[j] ? n : 0) * p.sw;
  }
  c.steps = (c.granules + 3) / 4;
  const std::int64_t steps = c.steps;
  const std::int64_t supers = (steps + U - 1) / U;

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  }
  uint4 cur[U][kTiles];
  start(p, [&] { load_super<T, U>(c, wrow, wok, warp, cur); });
  for (std::int64_t s = warp; s < supers; s += nwarps) {
    uint4 nxt[U][kTiles];
    load_super<T, U>(c, wrow, wok, s + nwarps, nxt);  // zeros (no access) past the end
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t step = s * U + u;
      if (step < steps) F::template step<T>(p, c, cur[u], acc, step);  // warp-uniform
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) cur[u][j] = nxt[u][j];
    }
  }
  // C value e of n-tile j: x row g or g + 8 (e >> 1), W row (output column) 2t or 2t + 1 (e & 1).
  epilogue<T, F, nwarps>(p, acc, [m0, n0](int i, int l, std::int64_t& m, std::int64_t& n) {
    const int j = i >> 2, e = i & 3;
    m = m0 + (l >> 2) + (e >> 1) * 8;
    n = n0 + 8 * j + 2 * (l & 3) + (e & 1);
  });
}

// Argument checks every format repeats (the Python adapter checked them first).
inline void check_common(const GemvArgs& a, int elems, const char* who) {
  PGK_REQUIRE_AS(who, a.dtype == DType::bf16 || a.dtype == DType::f16,
                 "x, bias and y must be float16 or bfloat16");
  PGK_REQUIRE_AS(who, a.m >= 0 && a.n >= 0 && a.k >= 0, "m, n, k must be >= 0");
  PGK_REQUIRE_AS(who, !a.gated || (a.n % 2 == 0 && a.bias == 0),
                 "a gated product needs an even n (gate rows, then up rows) and no bias");
  if (a.norm) {
    PGK_REQUIRE_AS(who, !a.gated, "the RMSNorm form has no gated product");
    PGK_REQUIRE_AS(who, a.m <= 1, "the RMSNorm form takes one row of x");
    PGK_REQUIRE_AS(who, a.k <= kGemvNormMaxK, "the RMSNorm form takes k <= 16384");
    PGK_REQUIRE_AS(who, a.eps >= 0.f, "eps must be >= 0");
    PGK_REQUIRE_AS(who, (a.residual == 0) == (a.h == 0),
                   "residual and h are given together (h = x + residual is stored)");
    if (a.m == 1 && a.n > 0 && a.k > 0) {
      PGK_REQUIRE_AS(who, a.norm_w != 0 && a.norm_w % 16 == 0 && a.residual % 16 == 0 &&
                              a.h % 16 == 0,
                     "norm_w, residual and h must be 16-byte aligned device pointers");
    }
  }
  PGK_REQUIRE_AS(who, a.k % elems == 0,
                 "k must be a multiple of the 16-byte granule of the format");
  // The quantized kernels count a row's granules in 32-bit ints, with room for the loop's
  // look-ahead past the end (applies to every format; no real weight comes near it).
  PGK_REQUIRE_AS(who, a.k / elems <= (std::int64_t(1) << 27),
                 "k is too large (at most 2^27 granules of 16 bytes a row)");
  if (a.m == 0 || a.n == 0) return;
  PGK_REQUIRE_AS(who, a.y != 0, "y must be a device pointer");
  PGK_REQUIRE_AS(who, (a.n + kTileN - 1) / kTileN <= INT_MAX, "n is too large for the grid");
  PGK_REQUIRE_AS(who, (a.m + kTileM - 1) / kTileM <= 65535,
                 "m is too large (at most 65535 * 16 rows)");
  if (a.k == 0) return;
  PGK_REQUIRE_AS(who, a.x != 0 && a.w != 0, "x and w must be device pointers");
  PGK_REQUIRE_AS(who, a.x % 16 == 0 && a.w % 16 == 0, "x and w must be 16-byte aligned");
  PGK_REQUIRE_AS(who, a.m == 1 || (a.x_row_stride % 8 == 0 && a.x_row_stride >= a.k),
                 "x's row stride must be a multiple of 8 elements and >= k");
  PGK_REQUIRE_AS(who, a.w_row_bytes % 16 == 0 && a.w_row_bytes * elems >= a.k * 16,
                 "w's row stride must be a multiple of 16 bytes and hold k values");
}

// The kernels' view of the arguments (both kernel headers launch with it).
inline Params make_params(const GemvArgs& a) {
  Params p;
  p.x = reinterpret_cast<const void*>(a.x);
  p.sx = a.x_row_stride;
  p.w = ptr<const unsigned char>(a.w);
  p.sw = a.w_row_bytes;
  p.scales = reinterpret_cast<const void*>(a.scales);
  p.ss = a.s_row_stride;
  p.bias = reinterpret_cast<const void*>(a.bias);
  p.y = reinterpret_cast<void*>(a.y);
  p.m = a.m;
  p.n = a.n;
  p.k = a.k;
  p.gscale = a.global_scale;
  p.pdl = a.pdl;
  p.prefetch = a.pdl && a.prefetch;
  p.norm_w = reinterpret_cast<const void*>(a.norm_w);
  p.residual = reinterpret_cast<const void*>(a.residual);
  p.h = reinterpret_cast<void*>(a.h);
  p.eps = a.eps;
  return p;
}

template <typename F>
inline void dispatch_half(DType dt, F&& f) {
  if (dt == DType::bf16) {
    f(__nv_bfloat16{});
  } else {
    f(__half{});
  }
}

template <typename T, typename F, typename C>
void launch_config(const GemvArgs& a, const char* name) {
  if (a.m == 0 || a.n == 0) return;
  const Params p = make_params(a);
  const std::int64_t nblk = (a.n + kTileN - 1) / kTileN;
  const std::int64_t mblk = (a.m + kTileM - 1) / kTileM;
  use_device(a.device);
  check(launch_kernel(gemv_kernel<T, F, C>,
                      dim3(static_cast<unsigned>(nblk), static_cast<unsigned>(mblk)),
                      dim3(C::Warps * 32), as_stream(a.stream), a.pdl, p),
        name, __FILE__, __LINE__);
}

// 16 warps a block under 256 blocks (few, long rows: K split finer) with F::kUnroll warp-steps
// a super-step; else 8 warps, with one warp-step a super-step from 512 blocks where the format
// says so for this K (F::one_step), else F::kUnroll. Measured on an H100 and an H200 against the
// other configurations (benchmarks/tuning/gemv_configs.sh, BENCHMARKS.md "GEMV"): the earlier
// choice (4 warps from 1024 blocks, else 8, four warp-steps a super-step) took 1.05-1.4x as
// long at M = 1 to 16.
template <typename T, typename F>
void launch(const GemvArgs& a, const char* name) {
  const std::int64_t nblk = (a.n + kTileN - 1) / kTileN;
  if (nblk < 256) {
    launch_config<T, F, Config<16, F::kUnroll>>(a, name);
  } else if (nblk >= 512 && F::one_step(a.k)) {
    launch_config<T, F, Config<8, 1>>(a, name);
  } else {
    launch_config<T, F, Config<8, F::kUnroll>>(a, name);
  }
}

}  // namespace gemv_detail
}  // namespace pgk
