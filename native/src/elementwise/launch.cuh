// Dtype dispatch of the elementwise family: from the run-time (in, out) dtypes to the few
// map-engine instantiations the Python side can produce (see elementwise.h).
#pragma once

#include <string>

#include "pygpukit_native/map.cuh"

namespace pgk {
namespace ew {

[[noreturn]] inline void unsupported(const char* op, DType in, DType out) {
  fail(op, std::string("no kernel for inputs of dtype ") + dtype_name(in) + " and output " +
               dtype_name(out));
}

// in == out (compute in compute_t<out>), or in float32 with a float16/bfloat16 output.
template <typename Op>
void same_or_f32(const MapArgs& a, DType in, DType out, const char* name, Op op = Op{}) {
  if (in == out) {
    dispatch_any(out, name, [&](auto t) {
      using T = decltype(t);
      if constexpr (Op::template ok<T>()) {
        launch_map<Op, compute_t<T>, T, T, T>(a, op, name);
      } else {
        unsupported(name, in, out);
      }
    });
  } else if (in == DType::f32 && out == DType::f16) {
    launch_map<Op, float, float, float, __half>(a, op, name);
  } else if (in == DType::f32 && out == DType::bf16) {
    launch_map<Op, float, float, float, BF16>(a, op, name);
  } else {
    unsupported(name, in, out);
  }
}

}  // namespace ew
}  // namespace pgk
