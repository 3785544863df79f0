// Where the quantized decode GEMV (gemv_wa.cuh) reads x: global memory in its loop, or one row
// staged in shared memory by every block before the loop (stage_row), or normalised there
// (norm_row, the RMSNorm form); and the 4-bit formats' x pairs (pairs04, x_pairs).
#pragma once

#include "gemv/gemv_kernel.cuh"
#include "pygpukit_native/reduce.cuh"

namespace pgk {
namespace gemv_detail {
namespace wa {

// x pairs for the 4-bit formats: r = 16 bytes of x (k 0..7 of the word) -> (k0,k4), (k1,k5),
// (k2,k6), (k3,k7), matching the decoders int4x8/e2m1x8 (gemv_wa.cuh).
__device__ __forceinline__ void pairs04(const uint4& r, std::uint32_t (&a)[4]) {
  a[0] = __byte_perm(r.x, r.z, 0x5410);
  a[1] = __byte_perm(r.x, r.z, 0x7632);
  a[2] = __byte_perm(r.y, r.w, 0x5410);
  a[3] = __byte_perm(r.y, r.w, 0x7632);
}

__device__ __forceinline__ uint4 pairs04(const uint4& r) {
  std::uint32_t a[4];
  pairs04(r, a);
  return make_uint4(a[0], a[1], a[2], a[3]);
}

// x pairs of word i (8 values of K from the step's granule start) for each x tile. x staged in
// shared memory lies in pair order already (stage_row, norm_row): one shared load, where x in
// global memory costs a load, zeroed registers for the test and four byte permutes.
template <typename X, int MT>
__device__ __forceinline__ void x_pairs(const X& c, int i, std::uint32_t (&b)[MT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    if constexpr (X::kShared) {
      const uint4 v = c.xload(mt, i);
      b[mt][0] = v.x;
      b[mt][1] = v.y;
      b[mt][2] = v.z;
      b[mt][3] = v.w;
    } else {
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (c.xvalid(mt)) v = c.xload(mt, i);
      pairs04(v, b[mt]);
    }
  }
}

// Where the kernel reads x: global memory in the loop (any rows); or one row copied into
// shared memory by every block before its loop (stage_row), or normalised there (norm_row, the
// RMSNorm form). In shared memory the row is zero-padded to the loop's last granule (the loop
// reads it untested) and, for the 4-bit formats (F::kPairs04), stored in the decoders' pair
// order, each 16 bytes through pairs04 once a block instead of once a warp-step and row tile,
// at staged_index (bank-conflict-free loads in the loop).
enum class XFrom { global, shared, norm };

// Values of x the shared row holds: whole warp-steps of granules (every granule the loop reads).
template <typename F>
__host__ __device__ constexpr std::int64_t staged_values(std::int64_t k) {
  const std::int64_t step_values = 4 * F::kElems;
  return (k + step_values - 1) / step_values * step_values;
}

// Where 16-byte vector v of the row (values 8 v ... 8 v + 7) lies in shared memory. The
// 4-bit formats: v = 16 s + 4 t + j is word j of granule 4 s + t, which lane t reads at
// warp-step s; it lies at 16 s + 4 j + t, so the four lanes t of a shared load read 64
// contiguous bytes (in the row's own order the granules lay 64 bytes apart: lanes t and t + 2
// met in the same banks). fp8 (two words a granule, 32 bytes apart): the row's own order.
template <typename F>
__device__ __forceinline__ std::int64_t staged_index(std::int64_t v) {
  if constexpr (F::kPairs04) {
    return (v & ~std::int64_t(15)) | ((v & 3) << 2) | ((v >> 2) & 3);
  } else {
    return v;
  }
}

// One row of x (row 0, k values) into xs: pair order and staged_index for the 4-bit formats,
// zeros from k to staged_values. Runs after the wait on the kernel ahead; ends with a barrier.
template <typename T, typename F>
__device__ __forceinline__ void stage_row(const Params& p, T* xs) {
  const T* x = static_cast<const T*>(p.x);
  const std::int64_t vecs = p.k / 8, padded = staged_values<F>(p.k) / 8;
  for (std::int64_t v = threadIdx.x; v < padded; v += blockDim.x) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (v < vecs) r = __ldg(reinterpret_cast<const uint4*>(x) + v);
    if constexpr (F::kPairs04) r = pairs04(r);
    reinterpret_cast<uint4*>(xs)[staged_index<F>(v)] = r;
  }
  __syncthreads();
}

// The RMSNorm form's prologue (GemvArgs::norm, one row of x): h = x (+ residual) rounded to T,
// rstd = 1 / sqrt(sum(h^2) / k + eps), xs[j] = T(h[j] * rstd * norm_w[j]) in shared memory:
// gp.rmsnorm's formula (native/src/norm/norm.cu), its sum of squares in this block's order.
// Every block computes the same row (the same order: blockDim is the launch's); block 0 stores
// h. xs is laid out as stage_row lays it (pair order, zero-padded). Runs after the wait on the
// kernel ahead; ends with a barrier, so xs is ready for all warps.
template <typename T, typename F>
__device__ __forceinline__ void norm_row(const Params& p, T* xs) {
  __shared__ float scratch[32];
  const T* x = static_cast<const T*>(p.x);
  const T* res = static_cast<const T*>(p.residual);
  const T* nw = static_cast<const T*>(p.norm_w);
  T* h = blockIdx.x == 0 && blockIdx.y == 0 ? static_cast<T*>(p.h) : nullptr;
  const std::int64_t vecs = p.k / 8;  // k % 32 == 0 (the 4-bit granule) or % 16 (fp8)
  float sq = 0.f;
  for (std::int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
    uint4 raw = __ldg(reinterpret_cast<const uint4*>(x) + v);
    T* e = reinterpret_cast<T*>(&raw);
    if (res != nullptr) {
      const uint4 rr = __ldg(reinterpret_cast<const uint4*>(res) + v);
      const T* r = reinterpret_cast<const T*>(&rr);
#pragma unroll
      for (int j = 0; j < 8; ++j) e[j] = from_compute<T>(to_compute(e[j]) + to_compute(r[j]));
      if (h != nullptr) reinterpret_cast<uint4*>(h)[v] = raw;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float f = to_compute(e[j]);
      sq += f * f;
    }
    // at its staged place already: the second pass reads and rewrites only its own slots
    reinterpret_cast<uint4*>(xs)[staged_index<F>(v)] = raw;
  }
  const float rstd = 1.f / sqrtf(block_sum(sq, scratch) / static_cast<float>(p.k) + p.eps);
  const std::int64_t padded = staged_values<F>(p.k) / 8;
  for (std::int64_t v = threadIdx.x; v < padded; v += blockDim.x) {  // the thread's own values
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);
    if (v < vecs) {
      raw = reinterpret_cast<const uint4*>(xs)[staged_index<F>(v)];
      const uint4 wr = __ldg(reinterpret_cast<const uint4*>(nw) + v);
      T* e = reinterpret_cast<T*>(&raw);
      const T* w = reinterpret_cast<const T*>(&wr);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        e[j] = from_compute<T>(to_compute(e[j]) * rstd * to_compute(w[j]));
      }
      if constexpr (F::kPairs04) raw = pairs04(raw);
    }
    reinterpret_cast<uint4*>(xs)[staged_index<F>(v)] = raw;
  }
  __syncthreads();
}

}  // namespace wa
}  // namespace gemv_detail
}  // namespace pgk
