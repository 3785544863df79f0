// One block per row. The row is read once to accumulate its statistics and again (from L1/L2:
// a row of at most a few tens of KiB) to normalise; the half types compute in float, float64 in
// double, one rounding at each store. With a residual, h = round(x + r) is stored in the first
// pass and the statistics are taken on that rounded h, which is what the next block reads.
#include "norm/norm.h"

#include <cmath>
#include <string>
#include <type_traits>

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

// The fast path: rows whose bytes are 16-byte aligned and whose weight has x's dtype. Each
// thread holds ITEMS vectors of 16 bytes in registers, so every element is read once and
// written once (the general kernels above re-read the row).
template <typename T>
struct Vec {
  static constexpr int E = 16 / sizeof(T);
  T v[E];
};

template <typename T>
__device__ inline Vec<T> load16(const T* p) {
  Vec<T> out;
  *reinterpret_cast<uint4*>(out.v) = __ldg(reinterpret_cast<const uint4*>(p));
  return out;
}

template <typename T>
__device__ inline void store16(T* p, const Vec<T>& v) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(v.v);
}

template <typename T, int ITEMS>
__global__ void rmsnorm_vec_kernel(const T* __restrict__ x, std::int64_t sx,
                                   const T* __restrict__ r, std::int64_t sr,
                                   const T* __restrict__ w, T* __restrict__ y, T* __restrict__ h,
                                   int n, double eps) {
  using C = typename Compute<T>::type;
  constexpr int E = Vec<T>::E;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const int nvec = n / E;
  Vec<T> v[ITEMS];
  C ss = 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) {
      v[i] = load16(x + row * sx + idx * E);
      if (r) {
        const Vec<T> rv = load16(r + row * sr + idx * E);
#pragma unroll
        for (int e = 0; e < E; ++e) v[i].v[e] = from_compute<T>(to_compute(v[i].v[e]) + to_compute(rv.v[e]));
        store16(h + row * n + idx * E, v[i]);
      }
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const C c = to_compute(v[i].v[e]);
        ss += c * c;
      }
    }
  }
  ss = block_sum(ss, scratch);
  const C rstd = C(1) / sqrt(ss / C(n) + C(eps));
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) {
      const Vec<T> wv = load16(w + idx * E);
      Vec<T> o;
#pragma unroll
      for (int e = 0; e < E; ++e) o.v[e] = from_compute<T>(to_compute(v[i].v[e]) * rstd * C(to_compute(wv.v[e])));
      store16(y + row * n + idx * E, o);
    }
  }
}

template <typename T, int ITEMS>
__global__ void layernorm_vec_kernel(const T* __restrict__ x, std::int64_t sx,
                                     const T* __restrict__ w, const T* __restrict__ b,
                                     T* __restrict__ y, int n, double eps) {
  using C = typename Compute<T>::type;
  constexpr int E = Vec<T>::E;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const int nvec = n / E;
  Vec<T> v[ITEMS];
  C s = 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) {
      v[i] = load16(x + row * sx + idx * E);
#pragma unroll
      for (int e = 0; e < E; ++e) s += to_compute(v[i].v[e]);
    }
  }
  const C mean = block_sum(s, scratch) / C(n);
  C sd = 0;  // two-pass variance, from registers
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const C d = to_compute(v[i].v[e]) - mean;
        sd += d * d;
      }
    }
  }
  const C rstd = C(1) / sqrt(block_sum(sd, scratch) / C(n) + C(eps));
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) {
      Vec<T> wv, bv, o;
      if (w) wv = load16(w + idx * E);
      if (b) bv = load16(b + idx * E);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        C c = (to_compute(v[i].v[e]) - mean) * rstd;
        if (w) c = c * C(to_compute(wv.v[e]));
        if (b) c = c + C(to_compute(bv.v[e]));
        o.v[e] = from_compute<T>(c);
      }
      store16(y + row * n + idx * E, o);
    }
  }
}

// (items per thread, threads) covering nvec vectors, or {0, 0} when the row is too long to hold.
struct VecPlan {
  int items, threads;
};

VecPlan vec_plan(std::int64_t nvec) {
  // Blocks of at most 256 threads first: several blocks per SM overlap one block's reductions
  // (barriers) with another's loads; long rows then take up to 1024 threads of 8 vectors.
  for (int items : {1, 2, 4, 8}) {
    const std::int64_t t = (nvec + items - 1) / items;
    if (t <= 256) return {items, static_cast<int>(((t + 31) / 32) * 32)};
  }
  const std::int64_t t = (nvec + 7) / 8;
  if (t <= 1024) return {8, static_cast<int>(((t + 31) / 32) * 32)};
  return {0, 0};
}

bool aligned16(std::uintptr_t p) { return (p & 15u) == 0; }

// Call f(std::integral_constant<int, ITEMS>) for the plan's ITEMS.
template <typename F>
void with_items(int items, F&& f) {
  switch (items) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    default:
      f(std::integral_constant<int, 8>{});
      break;
  }
}

// The vector path applies: weight/bias of x's dtype and unit stride, every row start and the
// row length multiples of 16 bytes.
bool vec_ok(const RowNormArgs& a, int e) {
  const bool base = a.wdtype == a.dtype && a.n % e == 0 && a.x_row_stride % e == 0 &&
                    aligned16(a.x) && aligned16(a.y) && a.n <= 0x7fffffff;
  const bool w = !a.weight || (a.w_stride == 1 && aligned16(a.weight));
  const bool b = !a.bias || (a.b_stride == 1 && aligned16(a.bias));
  const bool r = !a.residual || (a.res_row_stride % e == 0 && aligned16(a.residual) &&
                                 aligned16(a.h));
  return base && w && b && r;
}

int threads_for(std::int64_t n) {
  // About eight elements per thread, whole warps, at most 1024 threads.
  std::int64_t t = (n + 7) / 8;
  t = ((t + 31) / 32) * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

void check_rows(const char* who, const RowNormArgs& a) {
  PGK_REQUIRE_AS(who, a.rows >= 0 && a.n > 0, "rows must be >= 0 and n > 0");
  PGK_REQUIRE_AS(who, a.rows <= 0x7fffffff, "more than 2^31-1 rows");
  PGK_REQUIRE_AS(who, a.rows == 0 || (a.x && a.y), "x and y must be device pointers");
}

}  // namespace

void rmsnorm(const RowNormArgs& a) {
  check_rows("rmsnorm", a);
  PGK_REQUIRE(a.weight, "rmsnorm needs a weight");
  PGK_REQUIRE(!a.residual || a.h, "a residual needs h");
  if (a.rows == 0) return;
  use_device(a.device);
  const int e = 16 / dtype_bytes(a.dtype);
  const VecPlan plan = vec_plan(a.n / e);
  if (plan.items && vec_ok(a, e)) {
    dispatch_float(a.dtype, "rmsnorm", [&](auto t) {
      using T = decltype(t);
      with_items(plan.items, [&](auto items) {
        rmsnorm_vec_kernel<T, decltype(items)::value>
            <<<static_cast<unsigned>(a.rows), plan.threads, 0, as_stream(a.stream)>>>(
                ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.residual), a.res_row_stride,
                ptr<const T>(a.weight), ptr<T>(a.y), ptr<T>(a.h), static_cast<int>(a.n), a.eps);
      });
    });
    PGK_CHECK_LAUNCH("rmsnorm_vec_kernel");
    return;
  }
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
  const int e = 16 / dtype_bytes(a.dtype);
  const VecPlan plan = vec_plan(a.n / e);
  if (plan.items && vec_ok(a, e)) {
    dispatch_float(a.dtype, "layernorm", [&](auto t) {
      using T = decltype(t);
      with_items(plan.items, [&](auto items) {
        layernorm_vec_kernel<T, decltype(items)::value>
            <<<static_cast<unsigned>(a.rows), plan.threads, 0, as_stream(a.stream)>>>(
                ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.weight),
                ptr<const T>(a.bias), ptr<T>(a.y), static_cast<int>(a.n), a.eps);
      });
    });
    PGK_CHECK_LAUNCH("layernorm_vec_kernel");
    return;
  }
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
