// FP8 quantize / dequantize kernels (numerics of pygpukit/backends/cpu/quant.py, bit for bit).
// Per group: amax = max |x| in float32 (NaN propagates, as np.max does: a group holding NaN gets
// a NaN scale), scale = amax / fp8_max (__fdiv_rn: the IEEE quotient NumPy computes; 1.0 when it
// is 0), q = x / scale (__fdiv_rn) clamped to +-fp8_max by comparisons (which keep NaN, unlike
// fminf/fmaxf) and converted by cvt::e4m3_of / e5m2_of (__nv_cvt_float_to_fp8 with
// __NV_SATFINITE, round to nearest even: ml_dtypes' values for every finite input; inside the
// clamp the saturation never acts). An inf in a group gives an inf scale, codes x / inf = 0 and
// inf / inf = NaN, as NumPy.
//
// Kernels:
// - rows (gr == 1: per row, 1 x gc blocks): a warp per group, two passes over the group (the
//   second from L1/L2), the amax shared by a butterfly shuffle.
// - tiles (gr > 1: 2-D blocks): a block of 32 x 8 threads per group, the same two passes.
// - tensor: two launches, no host sync, no atomics: blocks reduce a grid-stride share of the
//   elements to one partial amax each; then every quantize block reduces all partials to the same
//   scale (deterministic) and writes its chunk; block 0 stores the scale.
// - dequantize: elementwise, q * scale in float32 rounded once to the result type.
#include "quant/quant.h"

#include <algorithm>
#include <climits>
#include <string>

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/numeric.cuh"

namespace pgk {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = kThreads * 8;  // elements per block of the per-tensor quantize launch

template <typename D>
struct Fp8;
template <>
struct Fp8<E4M3> {
  static constexpr float kMax = 448.0f;
  __device__ static E4M3 of(float y) { return cvt::e4m3_of(y); }
};
template <>
struct Fp8<E5M2> {
  static constexpr float kMax = 57344.0f;
  __device__ static E5M2 of(float y) { return cvt::e5m2_of(y); }
};

// max that propagates NaN (np.max); v >= 0 or NaN here.
__device__ __forceinline__ float nan_max(float m, float v) { return (v > m || v != v) ? v : m; }

__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, off));
  return m;
}

// Every thread of the block gets the block's max (blockDim.x * blockDim.y a multiple of 32).
__device__ float block_max(float m, float* scratch) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nwarps = (blockDim.x * blockDim.y) / 32;
  m = warp_max(m);
  __syncthreads();  // scratch may still be read by a previous call
  if ((tid & 31) == 0) scratch[tid >> 5] = m;
  __syncthreads();
  m = tid < nwarps ? scratch[tid] : 0.0f;
  if (tid < 32) m = warp_max(m);
  if (tid == 0) scratch[0] = m;
  __syncthreads();
  return scratch[0];
}

template <typename D>
__device__ __forceinline__ float scale_of(float amax) {
  const float s = __fdiv_rn(amax, Fp8<D>::kMax);
  return s == 0.0f ? 1.0f : s;
}

template <typename D>
__device__ __forceinline__ D code_of(float x, float scale) {
  float y = __fdiv_rn(x, scale);
  y = y < -Fp8<D>::kMax ? -Fp8<D>::kMax : y;
  y = y > Fp8<D>::kMax ? Fp8<D>::kMax : y;
  return Fp8<D>::of(y);
}

template <typename T>
__device__ __forceinline__ float absf(const T* x, std::int64_t off) {
  return fabsf(cvt::f32_of(x[off]));
}

template <typename T, typename D>
__global__ void __launch_bounds__(kThreads)
    quant_rows_kernel(const T* __restrict__ x, D* __restrict__ q, float* __restrict__ s,
                      std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
                      std::int64_t gc, std::int64_t nc) {
  const std::int64_t gid =
      static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (gid >= rows * nc) return;  // whole warps leave together
  const int lane = threadIdx.x & 31;
  const std::int64_t r = gid / nc;
  const std::int64_t g = gid - r * nc;
  const std::int64_t c_lo = g * gc;
  const std::int64_t c_hi = min(cols, c_lo + gc);
  const T* xr = x + r * sr;
  float m = 0.0f;
  for (std::int64_t c = c_lo + lane; c < c_hi; c += 32) m = nan_max(m, absf(xr, c * sc));
  const float scale = scale_of<D>(warp_max(m));
  if (lane == 0) s[gid] = scale;  // s is [rows, nc] contiguous
  D* qr = q + r * cols;
  for (std::int64_t c = c_lo + lane; c < c_hi; c += 32)
    qr[c] = code_of<D>(cvt::f32_of(xr[c * sc]), scale);
}

template <typename T, typename D>
__global__ void __launch_bounds__(kThreads)
    quant_tiles_kernel(const T* __restrict__ x, D* __restrict__ q, float* __restrict__ s,
                       std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
                       std::int64_t gr, std::int64_t gc, std::int64_t nc) {
  __shared__ float scratch[32];
  // 32-bit group arithmetic (the launcher keeps the group count within INT_MAX).
  const int gid = blockIdx.x;
  const std::int64_t bi = gid / static_cast<int>(nc);
  const std::int64_t bj = gid - bi * nc;
  const std::int64_t r_lo = bi * gr, r_hi = min(rows, r_lo + gr);
  const std::int64_t c_lo = bj * gc, c_hi = min(cols, c_lo + gc);
  float m = 0.0f;
  for (std::int64_t r = r_lo + threadIdx.y; r < r_hi; r += blockDim.y)
    for (std::int64_t c = c_lo + threadIdx.x; c < c_hi; c += blockDim.x)
      m = nan_max(m, absf(x, r * sr + c * sc));
  const float scale = scale_of<D>(block_max(m, scratch));
  if (threadIdx.x == 0 && threadIdx.y == 0) s[gid] = scale;
  for (std::int64_t r = r_lo + threadIdx.y; r < r_hi; r += blockDim.y)
    for (std::int64_t c = c_lo + threadIdx.x; c < c_hi; c += blockDim.x)
      q[r * cols + c] = code_of<D>(cvt::f32_of(x[r * sr + c * sc]), scale);
}

// Offset of linear element i of the [rows, cols] view (flat: x is contiguous).
__device__ __forceinline__ std::int64_t elem(std::int64_t i, bool flat, std::int64_t cols,
                                             std::int64_t sr, std::int64_t sc) {
  if (flat) return i;
  const std::int64_t r = i / cols;
  return r * sr + (i - r * cols) * sc;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    amax_partial_kernel(const T* __restrict__ x, float* __restrict__ partial, std::int64_t n,
                        bool flat, std::int64_t cols, std::int64_t sr, std::int64_t sc) {
  __shared__ float scratch[32];
  float m = 0.0f;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += step)
    m = nan_max(m, absf(x, elem(i, flat, cols, sr, sc)));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

template <typename T, typename D>
__global__ void __launch_bounds__(kThreads)
    quant_tensor_kernel(const T* __restrict__ x, D* __restrict__ q,
                        const float* __restrict__ partial, int n_partial, float* __restrict__ s,
                        std::int64_t n, bool flat, std::int64_t cols, std::int64_t sr,
                        std::int64_t sc) {
  __shared__ float scratch[32];
  float m = 0.0f;
  for (int p = threadIdx.x; p < n_partial; p += kThreads) m = nan_max(m, partial[p]);
  const float scale = scale_of<D>(block_max(m, scratch));
  if (blockIdx.x == 0 && threadIdx.x == 0) s[0] = scale;
  const std::int64_t lo = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t hi = min(n, lo + kChunk);
  for (std::int64_t i = lo + threadIdx.x; i < hi; i += kThreads)
    q[i] = code_of<D>(cvt::f32_of(x[elem(i, flat, cols, sr, sc)]), scale);
}

template <typename D, typename Y>
__global__ void __launch_bounds__(kThreads)
    dequant_kernel(const D* __restrict__ q, const float* __restrict__ s, Y* __restrict__ y,
                   std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
                   std::int64_t ssr, std::int64_t ssc, std::int64_t gr, std::int64_t gc) {
  // Block: 32 x 8 threads over 8 rows x 128 columns; rows stride by the grid's y extent.
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * 128 + threadIdx.x;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * 8 + threadIdx.y; r < rows;
       r += static_cast<std::int64_t>(gridDim.y) * 8) {
    const float* srow = s + (r / gr) * ssr;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t c = c0 + 32 * j;
      if (c < cols) {
        const float v = cvt::f32_of(q[r * sr + c * sc]) * srow[(c / gc) * ssc];
        y[r * cols + c] = from_compute<Y>(v);
      }
    }
  }
}

template <typename F>
void dispatch_fp8(DType dt, const char* who, F&& f) {
  switch (dt) {
    case DType::e4m3: return f(E4M3{});
    case DType::e5m2: return f(E5M2{});
    default:
      fail(who, std::string("unsupported dtype ") + dtype_name(dt) +
                    " (float8_e4m3fn, float8_e5m2)");
  }
}

template <typename F>
void dispatch_half_float(DType dt, const char* who, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(BF16{});
    default:
      fail(who, std::string("unsupported dtype ") + dtype_name(dt) +
                    " (float32, float16, bfloat16)");
  }
}

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

void quantize_fp8(const QuantizeArgs& a) {
  const char* who = "quantize_fp8";  // __func__ in the lambdas below would read "operator()"
  PGK_REQUIRE(a.rows >= 1 && a.cols >= 1, "x must have at least one element");
  PGK_REQUIRE(a.gr >= 1 && a.gc >= 1, "group sizes must be >= 1");
  const cudaStream_t st = as_stream(a.stream);
  const std::int64_t nr = cdiv(a.rows, a.gr), nc = cdiv(a.cols, a.gc);
  dispatch_half_float(a.src, who, [&](auto tx) {
    using T = decltype(tx);
    dispatch_fp8(a.dst, who, [&](auto dx) {
      using D = decltype(dx);
      use_device(a.device);  // after the dtype checks: bad arguments never touch the driver
      const T* x = ptr<const T>(a.x);
      D* q = ptr<D>(a.q);
      float* s = ptr<float>(a.scale);
      if (a.gr >= a.rows && a.gc >= a.cols) {
        PGK_REQUIRE_AS(who, a.partial != 0 && a.n_partial >= 1 && a.n_partial <= INT_MAX,
                       "per-tensor quantization needs a workspace of n_partial >= 1 floats");
        const std::int64_t n = a.rows * a.cols;
        const bool flat = a.sc == 1 && (a.sr == a.cols || a.rows == 1);
        const std::int64_t chunks = cdiv(n, kChunk);
        PGK_REQUIRE_AS(who, chunks <= INT_MAX, "x has too many elements for one launch");
        float* part = ptr<float>(a.partial);
        amax_partial_kernel<T><<<static_cast<unsigned>(a.n_partial), kThreads, 0, st>>>(
            x, part, n, flat, a.cols, a.sr, a.sc);
        PGK_CHECK_LAUNCH("amax_partial_kernel");
        quant_tensor_kernel<T, D><<<static_cast<unsigned>(chunks), kThreads, 0, st>>>(
            x, q, part, static_cast<int>(a.n_partial), s, n, flat, a.cols, a.sr, a.sc);
        PGK_CHECK_LAUNCH("quant_tensor_kernel");
      } else if (a.gr == 1) {
        const std::int64_t blocks = cdiv(a.rows * nc, kThreads / 32);
        PGK_REQUIRE_AS(who, blocks <= INT_MAX, "too many groups for one launch");
        quant_rows_kernel<T, D><<<static_cast<unsigned>(blocks), kThreads, 0, st>>>(
            x, q, s, a.rows, a.cols, a.sr, a.sc, a.gc, nc);
        PGK_CHECK_LAUNCH("quant_rows_kernel");
      } else {
        PGK_REQUIRE_AS(who, nr * nc <= INT_MAX, "too many groups for one launch");
        quant_tiles_kernel<T, D><<<static_cast<unsigned>(nr * nc), dim3(32, 8), 0, st>>>(
            x, q, s, a.rows, a.cols, a.sr, a.sc, a.gr, a.gc, nc);
        PGK_CHECK_LAUNCH("quant_tiles_kernel");
      }
    });
  });
}

void dequantize_fp8(const DequantizeArgs& a) {
  PGK_REQUIRE(a.rows >= 1 && a.cols >= 1, "q must have at least one element");
  PGK_REQUIRE(a.gr >= 1 && a.gc >= 1, "group sizes must be >= 1");
  const cudaStream_t st = as_stream(a.stream);
  const std::int64_t bx = cdiv(a.cols, 128);
  PGK_REQUIRE(bx <= INT_MAX, "q has too many columns for one launch");
  const dim3 grid(static_cast<unsigned>(bx),
                  static_cast<unsigned>(std::min<std::int64_t>(cdiv(a.rows, 8), 65535)));
  dispatch_fp8(a.src, "dequantize_fp8", [&](auto dx) {
    using D = decltype(dx);
    dispatch_half_float(a.dst, "dequantize_fp8", [&](auto yx) {
      using Y = decltype(yx);
      use_device(a.device);
      dequant_kernel<D, Y><<<grid, dim3(32, 8), 0, st>>>(
          ptr<const D>(a.q), ptr<const float>(a.scale), ptr<Y>(a.y), a.rows, a.cols, a.sr, a.sc,
          a.ssr, a.ssc, a.gr, a.gc);
      PGK_CHECK_LAUNCH("dequant_kernel");
    });
  });
}

}  // namespace pgk
