// The logistic function as every native kernel computes it (the activation family's sigmoid and
// silu, the MoE finish step's silu(gate) * up), and as the Triton twins do
// (pygpukit/backends/triton_kernels/activation.py sigmoid_c).
#pragma once

#include <cmath>

namespace pgk {

__device__ __forceinline__ float sig_exp(float v) { return expf(v); }
__device__ __forceinline__ double sig_exp(double v) { return exp(v); }

// sigmoid(x) = 1/(1+e) for x >= 0, else e/(1+e), e = exp(-|x|): exp never overflows, and one
// IEEE division either way.
template <typename C>
__device__ __forceinline__ C sigmoid_c(C x) {
  const C e = sig_exp(-fabs(x));
  return (x >= C(0) ? C(1) : e) / (C(1) + e);
}

}  // namespace pgk
