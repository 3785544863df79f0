// Unary functors for the map engine (operand 0 only; C is the compute type of the output).
#pragma once

#include <string>
#include <type_traits>

#include "pygpukit_native/map.cuh"

namespace pgk {
namespace un {

[[noreturn]] inline void unsupported(const char* op, DType in, DType out) {
  fail(op, std::string("no kernel for input dtype ") + dtype_name(in) + " and output " +
               dtype_name(out));
}

// in == out, or float32 in with a float16/bfloat16 out.
template <typename Op>
void run(const MapArgs& a, DType in, DType out, const char* name) {
  if (in == out) {
    dispatch_any(out, name, [&](auto t) {
      using T = decltype(t);
      if constexpr (Op::template ok<T>()) {
        launch_map<Op, compute_t<T>, T, T, T>(a, Op{}, name);
      } else {
        unsupported(name, in, out);
      }
    });
  } else if (in == DType::f32 && out == DType::f16) {
    launch_map<Op, float, float, float, __half>(a, Op{}, name);
  } else if (in == DType::f32 && out == DType::bf16) {
    launch_map<Op, float, float, float, BF16>(a, Op{}, name);
  } else {
    unsupported(name, in, out);
  }
}

}  // namespace un
}  // namespace pgk
