// Integer matrix products with NumPy's semantics (np.matmul on integer arrays): every product and
// sum wraps around in the result type, i.e. d = (sum_k a * b) mod 2^bits read as the result
// type. a, b and d share one integer dtype (int8, uint8, int16, int32, int64; the Python side
// casts mixed inputs first, as np.matmul does).
// Layout: `batch` matrices; a[z] = a + z * a_batch_stride, element (m, k) at m * sam + k * sak
// (any element strides, 0 for broadcast); b likewise (k, n) at k * sbk + n * sbn; d contiguous
// [batch, m, n].
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct MatmulIntArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;
  std::int64_t batch, m, n, k;
  std::uintptr_t a;
  std::int64_t a_batch_stride, sam, sak;
  std::uintptr_t b;
  std::int64_t b_batch_stride, sbk, sbn;
  std::uintptr_t d;
};

void matmul_int(const MatmulIntArgs& a);

}  // namespace pgk
