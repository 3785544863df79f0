// RMSNorm (optionally fused with the residual add) and LayerNorm over the last axis: the native
// twins of pygpukit/triton_kernels/norm.py, same numerics (pygpukit/backends/cpu/norm.py).
// Rows: row i of x starts at x + i * x_row_stride (elements), its last dim contiguous; y (and h)
// are contiguous [rows, n]. Weight/bias may have their own floating dtype and element stride.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct RowNormArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;  // x, residual, y, h
  DType wdtype;  // weight and bias (when present)
  std::int64_t rows, n;
  std::uintptr_t x;
  std::int64_t x_row_stride;
  std::uintptr_t residual;  // 0: none (rmsnorm only)
  std::int64_t res_row_stride;
  std::uintptr_t weight;  // 0: none (layernorm only)
  std::uintptr_t bias;    // 0: none (layernorm only)
  std::int64_t w_stride, b_stride;
  std::uintptr_t y, h;  // h: the stored x + residual (rmsnorm with residual)
  double eps;
};

void rmsnorm(const RowNormArgs& a);
void layernorm(const RowNormArgs& a);

}  // namespace pgk
