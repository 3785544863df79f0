// Device-side numerics shared by the kernels: dispatch from a run-time dtype to a kernel
// template (docs/design.md convention 2), and conversions through the compute type. Half types
// compute in float, float64 in double, one rounding at the store (the numerics of
// pygpukit/backends/cpu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/errors.h"

namespace pgk {

// Call f(T{}) with T the C++ type of a floating dtype (float, __half, __nv_bfloat16, double).
template <typename F>
decltype(auto) dispatch_float(DType dt, const char* who, F&& f) {
  switch (dt) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    case DType::f64:
      return f(double{});
    default:
      fail(who, std::string("unsupported dtype ") + dtype_name(dt) +
                    " (float32, float16, bfloat16, float64)");
  }
}

template <typename T>
struct Compute {
  using type = float;
};
template <>
struct Compute<double> {
  using type = double;
};

__host__ __device__ inline float to_compute(float v) { return v; }
__host__ __device__ inline double to_compute(double v) { return v; }
__device__ inline float to_compute(__half v) { return __half2float(v); }
__device__ inline float to_compute(__nv_bfloat16 v) { return __bfloat162float(v); }

// One rounding from the compute type to the stored type.
template <typename T>
struct Store;
template <>
struct Store<float> {
  __device__ static float cvt(float v) { return v; }
};
template <>
struct Store<__half> {
  __device__ static __half cvt(float v) { return __float2half_rn(v); }
};
template <>
struct Store<__nv_bfloat16> {
  __device__ static __nv_bfloat16 cvt(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Store<double> {
  __device__ static double cvt(double v) { return v; }
};

template <typename T, typename C>
__device__ inline T from_compute(C v) {
  return Store<T>::cvt(v);
}

}  // namespace pgk
