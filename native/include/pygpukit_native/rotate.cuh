// The RoPE pair rotation (a, b) -> (a c - b s, b c + a s) in the compute type (float or double),
// each product rounded on its own: __fmul_rn/__dmul_rn keep nvcc from contracting the products
// into an FMA, so float32 and float64 results equal NumPy's a * c - b * s bit for bit, and gp.rope
// and kv_cache_write's fused rotation store the same key bits.
#pragma once

namespace pgk {

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename C>
__device__ inline C rotate_first(C a, C b, C c, C s) {
  return mul_rn(a, c) - mul_rn(b, s);
}

template <typename C>
__device__ inline C rotate_second(C a, C b, C c, C s) {
  return mul_rn(b, c) + mul_rn(a, s);
}

}  // namespace pgk
