// Vector memory access for the memory-bound kernels (activations, bias_add, softmax, rope,
// embedding): N elements moved as one aligned Pack, which nvcc turns into 16-byte (or narrower)
// ld/st.global.v* instructions, plus conversions to and from the compute type that also cover
// the integer types (relu on integers, byte copies). The host helpers say when a launch may use
// packs: every pointer aligned to the pack size and every row stride a whole number of packs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "pygpukit_native/convert.cuh"

namespace pgk {

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <int N, typename T>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <int N, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& v) {
  *reinterpret_cast<Pack<T, N>*>(p) = v;
}

template <typename T>
constexpr bool is_half_type() {
  return std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;
}

// A stored value in compute type C (float for the half types, the type itself otherwise).
template <typename C, typename T>
__device__ __forceinline__ C as_compute(T v) {
  if constexpr (is_half_type<T>()) {
    return C(to_compute(v));
  } else {
    return C(v);
  }
}

// One rounding from the compute type to the stored type.
template <typename T, typename C>
__device__ __forceinline__ T as_stored(C v) {
  if constexpr (is_half_type<T>()) {
    return Store<T>::cvt(float(v));
  } else {
    return T(v);
  }
}

// Elements per 16-byte pack.
template <typename T>
constexpr int vec16() {
  return sizeof(T) >= 16 ? 1 : int(16 / sizeof(T));
}

// True when p is a multiple of `bytes` (0, an absent operand, counts as aligned).
inline bool aligned_to(std::uintptr_t p, std::size_t bytes) { return p % bytes == 0; }

// True when a row stride of `stride` elements keeps packs of v elements aligned row after row.
inline bool stride_ok(std::int64_t rows, std::int64_t stride, int v) {
  return rows <= 1 || stride % v == 0;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline int pow2_at_least(std::int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p <<= 1;
  return p;
}

}  // namespace pgk
