// Embedding gather (table[ids]) and bias_add (x + bias over the last axis): the native twins of
// pygpukit/triton_kernels/embedding.py.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

// y[i, :] = table[ids[i * ids_stride], :] for i < n_ids. The table is any dtype, copied as
// elem_bytes-sized words (1, 2, 4 or 8) with element strides (row, col); y rows are y_row_stride
// apart with contiguous columns. An id outside [0, num_rows) fills its row with `fill` (the
// dtype's NaN bits for float tables, 0 otherwise): no host sync, never an out-of-bounds read.
struct EmbeddingArgs {
  int device;
  std::uintptr_t stream;
  DType ids_dtype;  // int8, uint8, int16, int32, int64
  int elem_bytes;
  std::int64_t n_ids;
  std::uintptr_t ids;
  std::int64_t ids_stride;
  std::uintptr_t table;
  std::int64_t num_rows, dim, table_row_stride, table_col_stride;
  std::uintptr_t y;
  std::int64_t y_row_stride;
  std::uint64_t fill;
};

// y[r, :] = x[r, :] + bias over rows of n, computed in float (double for float64), one
// rounding. bias is contiguous, of x's dtype or its compute type (float32 / float64). y may be x.
struct BiasAddArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;       // x and y
  DType bias_dtype;  // dtype or its compute type
  std::int64_t rows, n;
  std::uintptr_t x;
  std::int64_t x_row_stride;
  std::uintptr_t bias;
  std::uintptr_t y;
  std::int64_t y_row_stride;
};

void embedding(const EmbeddingArgs& a);
void bias_add(const BiasAddArgs& a);

}  // namespace pgk
