// Softmax kernels. The last axis, three shapes of the same computation:
// - rows that fit in registers (up to 32 values a thread, 8 for float64, at most 1024 threads a
//   row: 32768 elements of 16-byte packs, 8192 for float64 or misaligned rows): one read and one
//   write per element. tpr threads per row, a power of two; rows of up to 32 threads share a
//   block and reduce with warp shuffles, longer rows take a block each and reduce through
//   shared memory.
// - longer rows (or rows whose packs are misaligned and too long for single elements): one block
//   per row, a max pass, a sum pass and a writing pass, so x is read three times (the later
//   passes mostly from L2). An online max/sum (Milakov & Gimelshein 2018) would save a pass but
//   rescales the running sum at every new maximum, one rounding each (2e-5 relative on a rising
//   fp32 row of 40000 was measured on the H200).
// - another axis (x contiguous [outer, n, inner]): one thread per (outer, inner) column, the same
//   three passes; neighbouring threads read neighbouring elements, so it is coalesced without
//   transposing x.
// Masked or -inf entries contribute exp(-inf) = 0; a row whose max is -inf is shifted by 0 and a
// zero sum divides by 1, so such a row is all zeros (the reference's convention). The result is
// e * (1/sum), as the Triton kernel stores it.
#include "softmax/softmax.h"

#include <climits>
#include <cmath>

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/reduce.cuh"
#include "pygpukit_native/vecio.cuh"

namespace pgk {
namespace {

__device__ __forceinline__ float ex(float v) { return expf(v); }
__device__ __forceinline__ double ex(double v) { return exp(v); }
__device__ __forceinline__ float mx(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double mx(double a, double b) { return fmax(a, b); }

template <typename C>
__device__ __forceinline__ C ninf() {
  return C(-INFINITY);
}

// Max over the tpr threads of a row: a warp segment (tpr <= 32, several rows per block) or the
// whole block (one row). fmax drops NaN, which the sum then brings back (exp(NaN - m) = NaN).
template <typename C>
__device__ C row_max(C v, int tpr, C* scratch) {
  if (tpr <= 32) {
    for (int off = tpr >> 1; off > 0; off >>= 1) v = mx(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = mx(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  C t = lane < warps ? scratch[lane] : ninf<C>();
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) t = mx(t, __shfl_xor_sync(0xffffffffu, t, off));
  __syncthreads();
  return t;
}

template <typename C>
__device__ C row_sum(C v, int tpr, C* scratch) {
  if (tpr <= 32) {
    for (int off = tpr >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
  }
  return block_sum(v, scratch);
}

template <typename T, int V, typename C>
__device__ __forceinline__ void load_vals(const T* p, std::int64_t j, std::int64_t n, C (&v)[V]) {
  if (j + V <= n) {
    const Pack<T, V> pk = load_pack<V>(p + j);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = as_compute<C>(pk.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = j + k < n ? as_compute<C>(p[j + k]) : C(0);
  }
}

template <typename T, int V, typename C>
__device__ __forceinline__ void store_vals(T* p, std::int64_t j, std::int64_t n, const C (&v)[V]) {
  if (j + V <= n) {
    Pack<T, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = as_stored<T>(v[k]);
    store_pack<V>(p + j, o);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (j + k < n) p[j + k] = as_stored<T>(v[k]);
    }
  }
}

template <typename T, int V, int VPT>
__global__ void __launch_bounds__(1024)
    softmax_reg_kernel(const T* __restrict__ x, std::int64_t sx, T* __restrict__ y,
                       std::int64_t sy, std::int64_t rows, std::int64_t n,
                       typename Compute<T>::type scale, int tpr, bool causal, std::int64_t sq) {
  using C = typename Compute<T>::type;
  __shared__ C scratch[32];
  const int lane = tpr <= 32 ? int(threadIdx.x & unsigned(tpr - 1)) : int(threadIdx.x);
  const std::int64_t row = std::int64_t(blockIdx.x) * (blockDim.x / tpr) + threadIdx.x / tpr;
  const bool live = row < rows;  // dead threads still join the shuffles
  const T* xr = x + (live ? row : 0) * sx;
  const std::int64_t limit = causal ? (live ? row % sq : 0) + (n - sq) : n - 1;
  C v[VPT][V];
#pragma unroll
  for (int p = 0; p < VPT; ++p) {
    const std::int64_t j = (std::int64_t(p) * tpr + lane) * V;
    load_vals<T, V>(xr, j, live ? n : 0, v[p]);
  }
  C m = ninf<C>();
#pragma unroll
  for (int p = 0; p < VPT; ++p) {
    const std::int64_t j = (std::int64_t(p) * tpr + lane) * V;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const C t = j + k <= limit ? v[p][k] * scale : ninf<C>();
      v[p][k] = t;
      m = mx(m, t);
    }
  }
  m = row_max(m, tpr, scratch);
  if (m == ninf<C>()) m = C(0);
  C s = 0;
#pragma unroll
  for (int p = 0; p < VPT; ++p) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[p][k] = ex(v[p][k] - m);
      s += v[p][k];
    }
  }
  s = row_sum(s, tpr, scratch);
  const C r = C(1) / (s == C(0) ? C(1) : s);
  if (!live) return;  // past the last barrier
  T* yr = y + row * sy;
#pragma unroll
  for (int p = 0; p < VPT; ++p) {
    const std::int64_t j = (std::int64_t(p) * tpr + lane) * V;
#pragma unroll
    for (int k = 0; k < V; ++k) v[p][k] *= r;
    store_vals<T, V>(yr, j, n, v[p]);
  }
}

constexpr int kLongThreads = 512;
constexpr int kLongUnroll = 4;

template <typename T, int V>
__global__ void __launch_bounds__(kLongThreads)
    softmax_long_kernel(const T* __restrict__ x, std::int64_t sx, T* __restrict__ y,
                        std::int64_t sy, std::int64_t n, typename Compute<T>::type scale,
                        bool causal, std::int64_t sq) {
  using C = typename Compute<T>::type;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * sx;
  T* yr = y + row * sy;
  const std::int64_t limit = causal ? row % sq + (n - sq) : n - 1;
  const std::int64_t step = std::int64_t(blockDim.x) * V;
  // Two read passes (max, then the sum of exp(v - max)) rather than an online sum: rescaling a
  // running sum at every new maximum accumulates one rounding per rescale, measured as 2e-5
  // relative on a rising 40000-long fp32 row; this keeps the register kernel's numerics.
  C m = ninf<C>();
  for (std::int64_t base = std::int64_t(threadIdx.x) * V; base < n; base += kLongUnroll * step) {
    C v[kLongUnroll][V];
#pragma unroll
    for (int u = 0; u < kLongUnroll; ++u) load_vals<T, V>(xr, base + u * step, n, v[u]);
#pragma unroll
    for (int u = 0; u < kLongUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (base + u * step + k <= limit) m = mx(m, v[u][k] * scale);
      }
    }
  }
  const C big = row_max(m, kLongThreads, scratch);
  const C shift = big == ninf<C>() ? C(0) : big;
  C s = 0;
  for (std::int64_t base = std::int64_t(threadIdx.x) * V; base < n; base += kLongUnroll * step) {
    C v[kLongUnroll][V];
#pragma unroll
    for (int u = 0; u < kLongUnroll; ++u) load_vals<T, V>(xr, base + u * step, n, v[u]);
#pragma unroll
    for (int u = 0; u < kLongUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (base + u * step + k <= limit) s += ex(v[u][k] * scale - shift);
      }
    }
  }
  const C tot = block_sum(s, scratch);
  const C r = C(1) / (tot == C(0) ? C(1) : tot);
  for (std::int64_t j = std::int64_t(threadIdx.x) * V; j < n; j += step) {
    C v[V];
    load_vals<T, V>(xr, j, n, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = j + k <= limit ? ex(v[k] * scale - shift) * r : C(0);
    store_vals<T, V>(yr, j, n, v);
  }
}

template <typename T>
__global__ void softmax_cols_kernel(const T* __restrict__ x, T* __restrict__ y,
                                    std::int64_t outer, std::int64_t n, std::int64_t inner,
                                    typename Compute<T>::type scale) {
  using C = typename Compute<T>::type;
  const std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= outer * inner) return;
  const std::int64_t o = idx / inner;
  const std::int64_t base = o * n * inner + (idx - o * inner);
  // max, then the sum of exp(v - max): see softmax_long_kernel for why not an online sum.
  C m = ninf<C>(), s = 0;
  for (std::int64_t j = 0; j < n; ++j) m = mx(m, as_compute<C>(x[base + j * inner]) * scale);
  const C shift = m == ninf<C>() ? C(0) : m;
  for (std::int64_t j = 0; j < n; ++j) s += ex(as_compute<C>(x[base + j * inner]) * scale - shift);
  const C r = C(1) / (s == C(0) ? C(1) : s);
  for (std::int64_t j = 0; j < n; ++j) {
    const C e = ex(as_compute<C>(x[base + j * inner]) * scale - shift);
    y[base + j * inner] = as_stored<T>(e * r);
  }
}

// Register-resident config: the fewest values per thread (VPT packs) that keep a row within 256
// threads, else up to 1024 threads; 0 when the row does not fit (the looped kernel then).
template <int V>
int pick_vpt(std::int64_t n, int max_vpt, int* tpr) {
  const std::int64_t nv = ceil_div(n, V);
  for (int limit : {256, 1024}) {
    for (int vpt = 1; vpt <= max_vpt; vpt *= 2) {
      const int t = pow2_at_least(ceil_div(nv, vpt));
      if (t <= limit) {
        *tpr = t;
        return vpt;
      }
    }
  }
  return 0;
}

template <typename T, int V>
void launch_rows(const SoftmaxArgs& a, cudaStream_t stream) {
  using C = typename Compute<T>::type;
  const C scale = C(a.scale);
  // At most 32 float or 8 double values a thread and 8 packs keep the row in registers without
  // spills at 1024 threads (64 registers a thread; 16 doubles were measured to spill).
  constexpr int kMaxVals = sizeof(C) == 8 ? 8 : 32;
  constexpr int kMaxVpt = kMaxVals / V < 8 ? kMaxVals / V : 8;
  int tpr = 0;
  const int vpt = pick_vpt<V>(a.n, kMaxVpt, &tpr);
  if (vpt == 0) {
    PGK_REQUIRE_AS("softmax", a.rows <= INT_MAX, "more than 2^31-1 rows");
    softmax_long_kernel<T, V><<<unsigned(a.rows), kLongThreads, 0, stream>>>(
        ptr<const T>(a.x), a.x_row_stride, ptr<T>(a.y), a.y_row_stride, a.n, scale, a.causal,
        a.sq);
    PGK_CHECK_LAUNCH("softmax_long_kernel");
    return;
  }
  const int threads = tpr <= 32 ? 128 : tpr;
  const std::int64_t blocks = ceil_div(a.rows, threads / tpr);
  PGK_REQUIRE_AS("softmax", blocks <= INT_MAX, "more than 2^31-1 blocks");
  auto go = [&](auto per) {
    constexpr int P = decltype(per)::value;
    if constexpr (P <= kMaxVpt) {
      softmax_reg_kernel<T, V, P><<<unsigned(blocks), threads, 0, stream>>>(
          ptr<const T>(a.x), a.x_row_stride, ptr<T>(a.y), a.y_row_stride, a.rows, a.n, scale, tpr,
          a.causal, a.sq);
    }
  };
  switch (vpt) {
    case 1:
      go(std::integral_constant<int, 1>{});
      break;
    case 2:
      go(std::integral_constant<int, 2>{});
      break;
    case 4:
      go(std::integral_constant<int, 4>{});
      break;
    default:
      go(std::integral_constant<int, 8>{});
  }
  PGK_CHECK_LAUNCH("softmax_reg_kernel");
}

}  // namespace

void softmax(const SoftmaxArgs& a) {
  PGK_REQUIRE(a.rows >= 0 && a.n >= 0, "rows and n must be >= 0");
  PGK_REQUIRE(!a.causal || (a.sq > 0 && a.rows % a.sq == 0), "causal needs rows = k * sq");
  if (a.rows == 0 || a.n == 0) return;
  PGK_REQUIRE(a.x && a.y, "x and y must be device pointers");
  use_device(a.device);
  const cudaStream_t stream = as_stream(a.stream);
  dispatch_float(a.dtype, "softmax", [&](auto t) {
    using T = decltype(t);
    constexpr int V = vec16<T>();
    const bool vec = aligned_to(a.x, 16) && aligned_to(a.y, 16) &&
                     stride_ok(a.rows, a.x_row_stride, V) && stride_ok(a.rows, a.y_row_stride, V);
    if (vec) {
      launch_rows<T, V>(a, stream);
    } else {
      launch_rows<T, 1>(a, stream);
    }
  });
}

void softmax_cols(const SoftmaxColsArgs& a) {
  PGK_REQUIRE(a.outer >= 0 && a.n >= 0 && a.inner >= 0, "sizes must be >= 0");
  if (a.outer == 0 || a.n == 0 || a.inner == 0) return;
  PGK_REQUIRE(a.x && a.y, "x and y must be device pointers");
  const std::int64_t blocks = ceil_div(a.outer * a.inner, 256);
  PGK_REQUIRE(blocks <= INT_MAX, "more than 2^31-1 blocks");
  use_device(a.device);
  dispatch_float(a.dtype, "softmax", [&](auto t) {
    using T = decltype(t);
    using C = typename Compute<T>::type;
    softmax_cols_kernel<T><<<unsigned(blocks), 256, 0, as_stream(a.stream)>>>(
        ptr<const T>(a.x), ptr<T>(a.y), a.outer, a.n, a.inner, C(a.scale));
  });
  PGK_CHECK_LAUNCH("softmax_cols_kernel");
}

}  // namespace pgk
