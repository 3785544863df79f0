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

// RMSNorm and LayerNorm share one skeleton per path (general below, vector further down):
// statistics passes, a block reduction after each, then the normalising pass. CENTER tells them
// apart: LayerNorm centres (subtracts the row mean, a pass and a reduction before the variance),
// RMSNorm does not. An operand only one op has (RMSNorm's residual r and its sum h, LayerNorm's
// bias) reaches the other op's skeleton as a nullptr constant, so its branches compile away. The
// __global__ kernels keep their own parameter lists. RMSNorm's weight is required (checked on
// the host), LayerNorm's optional: `!CENTER || w`, written out at each use (hoisting it into a
// bool changed the vector kernels' machine code).

template <bool CENTER, typename T, typename W>
__device__ __forceinline__ void norm_row(const T* __restrict__ x, std::int64_t sx,
                                         const T* __restrict__ r, std::int64_t sr,
                                         const W* __restrict__ w, std::int64_t sw,
                                         const W* __restrict__ b, std::int64_t sb,
                                         T* __restrict__ y, T* __restrict__ h, std::int64_t n,
                                         double eps) {
  using C = typename Compute<T>::type;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * sx;
  T* yr = y + row * n;
  T* hr = h ? h + row * n : nullptr;
  C mean = 0;
  if constexpr (CENTER) {
    C s = 0;
    for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_compute(xr[j]);
    mean = block_sum(s, scratch) / C(n);
  }
  // LayerNorm: two-pass variance (mean of squared deviations), as torch and the NumPy reference.
  C sq = 0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    C v = to_compute(xr[j]);
    if (r) {
      T hv = from_compute<T>(v + to_compute(r[row * sr + j]));
      hr[j] = hv;
      v = to_compute(hv);
    }
    if constexpr (CENTER) v = v - mean;
    sq += v * v;
  }
  const C rstd = C(1) / sqrt(block_sum(sq, scratch) / C(n) + C(eps));
  const T* src = r ? hr : xr;  // each thread re-reads only the elements it wrote itself
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    C v = to_compute(src[j]);
    if constexpr (CENTER) v = v - mean;
    v = v * rstd;
    if (!CENTER || w) v = v * C(to_compute(w[j * sw]));
    if (b) v = v + C(to_compute(b[j * sb]));
    yr[j] = from_compute<T>(v);
  }
}

template <typename T, typename W>
__global__ void rmsnorm_kernel(const T* __restrict__ x, std::int64_t sx, const T* __restrict__ r,
                               std::int64_t sr, const W* __restrict__ w, std::int64_t sw,
                               T* __restrict__ y, T* __restrict__ h, std::int64_t n, double eps) {
  norm_row<false, T, W>(x, sx, r, sr, w, sw, nullptr, 0, y, h, n, eps);
}

template <typename T, typename W>
__global__ void layernorm_kernel(const T* __restrict__ x, std::int64_t sx,
                                 const W* __restrict__ w, std::int64_t sw,
                                 const W* __restrict__ b, std::int64_t sb, T* __restrict__ y,
                                 std::int64_t n, double eps) {
  norm_row<true, T, W>(x, sx, nullptr, 0, w, sw, b, sb, y, nullptr, n, eps);
}

// The fast path: rows whose bytes are 16-byte aligned and whose weight has x's dtype. Each
// thread holds ITEMS vectors of 16 bytes in registers, so every element is read once and
// written once (the general path re-reads the row).
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

// f(i, idx) for each of the thread's ITEMS register slots whose vector idx (slot i of every
// thread covers one blockDim.x-wide stretch of the row, so a warp's loads are contiguous) lies
// in the row.
template <int ITEMS, typename F>
__device__ __forceinline__ void for_vecs(int nvec, F&& f) {
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nvec) f(i, idx);
  }
}

template <bool CENTER, typename T, int ITEMS>
__device__ __forceinline__ void norm_row_vec(const T* __restrict__ x, std::int64_t sx,
                                             const T* __restrict__ r, std::int64_t sr,
                                             const T* __restrict__ w, const T* __restrict__ b,
                                             T* __restrict__ y, T* __restrict__ h, int n,
                                             double eps) {
  using C = typename Compute<T>::type;
  constexpr int E = Vec<T>::E;
  __shared__ C scratch[32];
  const std::int64_t row = blockIdx.x;
  const int nvec = n / E;
  Vec<T> v[ITEMS];
  C s = 0;  // LayerNorm: the sum; RMSNorm, which waits for no mean: the sum of squares
  for_vecs<ITEMS>(nvec, [&](int i, int idx) {
    v[i] = load16(x + row * sx + idx * E);
    if (r) {
      const Vec<T> rv = load16(r + row * sr + idx * E);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        v[i].v[e] = from_compute<T>(to_compute(v[i].v[e]) + to_compute(rv.v[e]));
      }
      store16(h + row * n + idx * E, v[i]);
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const C c = to_compute(v[i].v[e]);
      s += CENTER ? c : c * c;
    }
  });
  C mean = 0, sq = s;
  if constexpr (CENTER) {
    mean = block_sum(s, scratch) / C(n);
    sq = 0;  // two-pass variance, from registers
    for_vecs<ITEMS>(nvec, [&](int i, int) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const C d = to_compute(v[i].v[e]) - mean;
        sq += d * d;
      }
    });
  }
  const C rstd = C(1) / sqrt(block_sum(sq, scratch) / C(n) + C(eps));
  for_vecs<ITEMS>(nvec, [&](int i, int idx) {
    Vec<T> wv, bv, o;
    if (!CENTER || w) wv = load16(w + idx * E);
    if (b) bv = load16(b + idx * E);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      C c = to_compute(v[i].v[e]);
      if constexpr (CENTER) c = c - mean;
      c = c * rstd;
      if (!CENTER || w) c = c * C(to_compute(wv.v[e]));
      if (b) c = c + C(to_compute(bv.v[e]));
      o.v[e] = from_compute<T>(c);
    }
    store16(y + row * n + idx * E, o);
  });
}

template <typename T, int ITEMS>
__global__ void rmsnorm_vec_kernel(const T* __restrict__ x, std::int64_t sx,
                                   const T* __restrict__ r, std::int64_t sr,
                                   const T* __restrict__ w, T* __restrict__ y, T* __restrict__ h,
                                   int n, double eps) {
  norm_row_vec<false, T, ITEMS>(x, sx, r, sr, w, nullptr, y, h, n, eps);
}

template <typename T, int ITEMS>
__global__ void layernorm_vec_kernel(const T* __restrict__ x, std::int64_t sx,
                                     const T* __restrict__ w, const T* __restrict__ b,
                                     T* __restrict__ y, int n, double eps) {
  norm_row_vec<true, T, ITEMS>(x, sx, nullptr, 0, w, b, y, nullptr, n, eps);
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

// The launch both ops share: nothing for no rows, the vector kernel when the row fits in
// registers and vec_ok holds, else the general one. vec(T{}, ITEMS, threads) and
// general(T{}, W{}, threads) issue the op's own <<<>>>; the names are for a launch error.
template <typename VecLaunch, typename GeneralLaunch>
void launch_rows(const char* who, const RowNormArgs& a, const char* vec_name, VecLaunch&& vec,
                 const char* general_name, GeneralLaunch&& general) {
  if (a.rows == 0) return;
  use_device(a.device);
  const int e = 16 / dtype_bytes(a.dtype);
  const VecPlan plan = vec_plan(a.n / e);
  if (plan.items && vec_ok(a, e)) {
    dispatch_float(a.dtype, who, [&](auto t) {
      with_items(plan.items, [&](auto items) { vec(t, items, plan.threads); });
    });
    PGK_CHECK_LAUNCH(vec_name);
    return;
  }
  const int threads = threads_for(a.n);
  dispatch_float(a.dtype, who, [&](auto t) {
    dispatch_float(a.wdtype, who, [&](auto wt) { general(t, wt, threads); });
  });
  PGK_CHECK_LAUNCH(general_name);
}

}  // namespace

void rmsnorm(const RowNormArgs& a) {
  check_rows("rmsnorm", a);
  PGK_REQUIRE(a.weight, "rmsnorm needs a weight");
  PGK_REQUIRE(!a.residual || a.h, "a residual needs h");
  const auto rows = static_cast<unsigned>(a.rows);
  launch_rows(
      "rmsnorm", a, "rmsnorm_vec_kernel",
      [&](auto t, auto items, int threads) {
        using T = decltype(t);
        rmsnorm_vec_kernel<T, decltype(items)::value><<<rows, threads, 0, as_stream(a.stream)>>>(
            ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.residual), a.res_row_stride,
            ptr<const T>(a.weight), ptr<T>(a.y), ptr<T>(a.h), static_cast<int>(a.n), a.eps);
      },
      "rmsnorm_kernel",
      [&](auto t, auto wt, int threads) {
        using T = decltype(t);
        using W = decltype(wt);
        rmsnorm_kernel<T, W><<<rows, threads, 0, as_stream(a.stream)>>>(
            ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.residual), a.res_row_stride,
            ptr<const W>(a.weight), a.w_stride, ptr<T>(a.y), a.residual ? ptr<T>(a.h) : nullptr,
            a.n, a.eps);
      });
}

void layernorm(const RowNormArgs& a) {
  check_rows("layernorm", a);
  const auto rows = static_cast<unsigned>(a.rows);
  launch_rows(
      "layernorm", a, "layernorm_vec_kernel",
      [&](auto t, auto items, int threads) {
        using T = decltype(t);
        layernorm_vec_kernel<T, decltype(items)::value><<<rows, threads, 0, as_stream(a.stream)>>>(
            ptr<const T>(a.x), a.x_row_stride, ptr<const T>(a.weight), ptr<const T>(a.bias),
            ptr<T>(a.y), static_cast<int>(a.n), a.eps);
      },
      "layernorm_kernel",
      [&](auto t, auto wt, int threads) {
        using T = decltype(t);
        using W = decltype(wt);
        layernorm_kernel<T, W><<<rows, threads, 0, as_stream(a.stream)>>>(
            ptr<const T>(a.x), a.x_row_stride, ptr<const W>(a.weight), a.w_stride,
            ptr<const W>(a.bias), a.b_stride, ptr<T>(a.y), a.n, a.eps);
      });
}

}  // namespace pgk
