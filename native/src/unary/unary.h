// Elementwise unary math: neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh, the native twins of
// pygpukit/triton_kernels/unary.py on the map engine, same numerics
// (pygpukit/backends/cpu/unary.py): compute in float32 (float64 for float64), round once.
// Transcendentals are CUDA's accurate math functions (the libdevice versions Triton calls, not
// the approximate PTX instructions); sqrt and rsqrt are correctly rounded (sqrt.rn, div.rn).
//
// Dtype combinations (the Python side casts the input first when needed): in == out (neg/abs
// on any numeric dtype, the rest on float dtypes), or in float32 with a float16/bfloat16 out.
#pragma once

#include <string>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/map_args.h"

namespace pgk {

void unary(const MapArgs& a, const std::string& op, DType in, DType out);

bool unary_sign(const MapArgs& a, const std::string& op, DType in, DType out);  // neg, abs
bool unary_math(const MapArgs& a, const std::string& op, DType in, DType out);  // the rest

}  // namespace pgk
