// softmax(scale * x) along one axis with the end-aligned causal mask: the native twin of
// pygpukit/triton_kernels/softmax.py, same numerics (pygpukit/backends/cpu/softmax.py): float32
// (float64 for float64), max-subtracted, one rounding at the store; a row with no visible finite
// entry gives zeros, never NaN.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

// The last axis: rows of n elements, row i of x at x + i * x_row_stride (elements), of y at
// y + i * y_row_stride, the last dim contiguous in both. causal: row i is query i % sq of an
// [..., sq, n] score block and sees key j iff j <= i % sq + (n - sq).
struct SoftmaxArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;
  std::int64_t rows, n;
  std::uintptr_t x;
  std::int64_t x_row_stride;
  std::uintptr_t y;
  std::int64_t y_row_stride;
  double scale;  // 1.0 when none (exact)
  bool causal;
  std::int64_t sq;
};

// Another axis: x and y contiguous [outer, n, inner], softmax along n (inner > 1).
struct SoftmaxColsArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;
  std::int64_t outer, n, inner;
  std::uintptr_t x, y;
  double scale;
};

void softmax(const SoftmaxArgs& a);
void softmax_cols(const SoftmaxColsArgs& a);

}  // namespace pgk
