// Binary arithmetic, comparisons, where and clamp: the native twins of
// pygpukit/triton_kernels/elementwise.py on the map engine (pygpukit_native/map.cuh), same
// numerics (pygpukit/backends/cpu/elementwise.py).
//
// The Python side (pygpukit/backends/native_kernels/elementwise.py) brings every array input to
// one storage dtype `in` first, so a launch sees few type combinations:
// - arithmetic and clamp: in == out (any numeric dtype; bool for add/mul/maximum/minimum), or
//   in float32 with out float16/bfloat16 (computed in float32, rounded once at the store);
// - comparisons: any numeric or bool `in`, compared in its compute type, out bool;
// - where: out's raw bits (the Python side converts a and b to out's dtype), input 0 bool.
// Scalars come in the compute type of the launch (MapScalar), where's as out's bits.
#pragma once

#include <string>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/map_args.h"

namespace pgk {

void elementwise(const MapArgs& a, const std::string& op, DType in, DType out);

// The groups elementwise() dispatches to (one .cu each, compiled in parallel).
bool arith(const MapArgs& a, const std::string& op, DType in, DType out);
bool compare(const MapArgs& a, const std::string& op, DType in, DType out);
bool select(const MapArgs& a, const std::string& op, DType in, DType out);

}  // namespace pgk
