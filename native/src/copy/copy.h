// copy (any layout -> any layout of the same shape and dtype, bit-exact) and cast (every pair
// of the twelve dtypes), the native twins of pygpukit/triton_kernels/copy.py on the map engine.
// Cast values are exactly the NumPy backend's astype (NumPy + ml_dtypes), see
// pygpukit_native/numeric.cuh for the rules (fp8 overflow to NaN/inf, x86 float -> int, ...).
#pragma once

#include <string>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/map_args.h"

namespace pgk {

// op "copy" (in == out) or "cast".
void copy(const MapArgs& a, const std::string& op, DType in, DType out);

// The cast instantiations, grouped by source dtype (one .cu each, compiled in parallel).
bool cast_from_float(const MapArgs& a, DType in, DType out);  // float32/16, bfloat16, float64
bool cast_from_int(const MapArgs& a, DType in, DType out);    // int64/32/16/8, uint8
bool cast_from_other(const MapArgs& a, DType in, DType out);  // bool, float8 e4m3fn / e5m2

}  // namespace pgk
