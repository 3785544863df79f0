// Activations sigmoid, relu, silu, gelu (erf and tanh forms) and the gated silu_mul / gelu_mul:
// the native twins of pygpukit/triton_kernels/activation.py, same formulas, evaluation order and
// compute types (pygpukit/backends/cpu/activation.py). One dtype per launch for every operand
// (the Python adapter casts a differing input to the result dtype where that is exact).
// Rows: operand row i starts at ptr + i * row_stride (elements), its last dim contiguous.
#pragma once

#include <cstdint>
#include <string>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct ActivationArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;  // x, gate, up and y; floats, plus the integer types for relu
  std::int64_t rows, n;
  std::uintptr_t x;  // x, or gate for the gated ops
  std::int64_t x_row_stride;
  std::uintptr_t up;  // gated ops only (0 otherwise)
  std::int64_t up_row_stride;
  std::uintptr_t y;
  std::int64_t y_row_stride;
};

// op: sigmoid, relu, silu, gelu_none, gelu_tanh, silu_mul, gelu_mul_none, gelu_mul_tanh.
void activation(const std::string& op, const ActivationArgs& a);

}  // namespace pgk
