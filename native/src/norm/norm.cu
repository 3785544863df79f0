// One block per row. The row is read once to accumulate its statistics and again (from L1/L2:
// a row of at most a few tens of KiB) to normalise; the half types compute in float, float64 in
// double, one rounding at each store. With a residual, h = round(x + r) is stored in the first
// pass and the statistics are taken on that rounded h, which is what the next block reads.
#include "norm/norm.h"

#include <cmath>
#include <string>

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/reduce.cuh"

namespace pgk {
namespace {

template <typename T, typename W>
__global__ void rmsnorm_kernel(const T* __restrict__ x, std::int64_t sx, const T* __restrict__ r,
                               std::int64_t sr, const W* __restrict__ w, std::int64_t sw,
                               T* __restrict__ y, T* __restrict__ h, std::int64_t n, double eps) {
  using C = typename Compute<T>::type;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * sx;
  T* yr = y + row * n;
  T* hr = h ? h + row * n : nullptr;
  C ss = 0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    C v = to_compute(xr[j]);
    if (r) {
      T hv = from_compute<T>(v + to_compute(r[row * sr + j]));
      hr[j] = hv;
      v = to_compute(hv);
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const C rstd = C(1) / sqrt(ss / C(n) + C(eps));
  const T* src = r ? hr : xr;  // each thread re-reads only the elements it wrote itself
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C v = to_compute(src[j]) * rstd;
    yr[j] = from_compute<T>(v * C(to_compute(w[j * sw])));
  }
}

template <typename T, typename W>
__global__ void layernorm_kernel(const T* __restrict__ x, std::int64_t sx,
                                 const W* __restrict__ w, std::int64_t sw,
                                 const W* __restrict__ b, std::int64_t sb, T* __restrict__ y,
                                 std::int64_t n, double eps) {
  using C = typename Compute<T>::type;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * sx;
  T* yr = y + row * n;
  C s = 0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_compute(xr[j]);
  const C mean = block_sum(s, scratch) / C(n);
  // Two-pass variance (mean of squared deviations), as torch and the NumPy reference.
  C sd = 0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C d = to_compute(xr[j]) - mean;
    sd += d * d;
  }
  const C rstd = C(1) / sqrt(block_sum(sd, scratch) / C(n) + C(eps));
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    C v = (to_compute(xr[j]) - mean) * rstd;
    if (w) v = v * C(to_compute(w[j * sw]));
    if (b) v = v + C(to_compute(b[j * sb]));
    yr[j] = from_compute<T>(v);
  }
}

int threads_for(std::int64_t n) {
  // About eight elements per thread, whole warps, at most 1024 threads.
  std::int64_t t = (n + 7) / 8;
  t = ((t + 31) / 32) * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

void check_rows(const char* who, const RowNormArgs& a) {
  PGK_REQUIRE(a.rows >= 0 && a.n > 0, "rows must be >= 0 and n > 0");
  PGK_REQUIRE(a.rows <= 0x7fffffff, "more than 2^31-1 rows");
  PGK_REQUIRE(a.rows == 0 || (a.x && a.y), std::string(who) + ": x and y must be device pointers");
}

}  // namespace

void rmsnorm(const RowNormArgs& a) {
  check_rows("rmsnorm", a);
  PGK_REQUIRE(a.weight, "rmsnorm needs a weight");
  PGK_REQUIRE(!a.residual || a.h, "a residual needs h");
  if (a.rows == 0) return;
  use_device(a.device);
  const int threads = threads_for(a.n);
  dispatch_float(a.dtype, "rmsnorm", [&](auto t) {
    using T = decltype(t);
    dispatch_float(a.wdtype, "rmsnorm", [&](auto wt) {
      using W = decltype(wt);
      rmsnorm_kernel<T, W><<<static_cast<unsigned>(a.rows), threads, 0, as_stream(a.stream)>>>(
          ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.residual), a.res_row_stride,
          ptr<const W>(a.weight), a.w_stride, ptr<T>(a.y), a.residual ? ptr<T>(a.h) : nullptr,
          a.n, a.eps);
    });
  });
  PGK_CHECK_LAUNCH("rmsnorm_kernel");
}

void layernorm(const RowNormArgs& a) {
  check_rows("layernorm", a);
  if (a.rows == 0) return;
  use_device(a.device);
  const int threads = threads_for(a.n);
  dispatch_float(a.dtype, "layernorm", [&](auto t) {
    using T = decltype(t);
    dispatch_float(a.wdtype, "layernorm", [&](auto wt) {
      using W = decltype(wt);
      layernorm_kernel<T, W><<<static_cast<unsigned>(a.rows), threads, 0, as_stream(a.stream)>>>(
          ptr<const T>(a.x), a.x_row_stride, ptr<const W>(a.weight), a.w_stride,
          ptr<const W>(a.bias), a.b_stride, ptr<T>(a.y), a.n, a.eps);
    });
  });
  PGK_CHECK_LAUNCH("layernorm_kernel");
}

}  // namespace pgk
