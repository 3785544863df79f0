// FP8 quantize / dequantize with amax-derived scales: the native twins of
// pygpukit/triton_kernels/quant.py, same numerics (pygpukit/backends/cpu/quant.py).
// An array is viewed as [rows, cols] with element strides (sr, sc); q and y are contiguous
// [rows, cols]; scale holds one fp32 value per group of (gr, gc) elements.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct QuantizeArgs {
  int device;
  std::uintptr_t stream;
  DType src;  // x: float32 / float16 / bfloat16
  DType dst;  // q: float8_e4m3fn / float8_e5m2
  std::int64_t rows, cols, sr, sc;
  std::uintptr_t x, q;
  std::uintptr_t scale;  // contiguous [ceil(rows / gr), ceil(cols / gc)]
  std::int64_t gr, gc;
  // Per tensor (gr >= rows and gc >= cols) only: n_partial fp32 slots of workspace for the
  // first launch's per-block amax (the second launch reduces them; no host sync).
  std::uintptr_t partial;
  std::int64_t n_partial;
};

struct DequantizeArgs {
  int device;
  std::uintptr_t stream;
  DType src;  // q: float8_e4m3fn / float8_e5m2
  DType dst;  // y: float32 / float16 / bfloat16
  std::int64_t rows, cols, sr, sc;
  std::uintptr_t q, y;
  std::uintptr_t scale;  // [ceil(rows / gr), ceil(cols / gc)] with element strides (ssr, ssc)
  std::int64_t ssr, ssc, gr, gc;
};

void quantize_fp8(const QuantizeArgs& a);
void dequantize_fp8(const DequantizeArgs& a);

}  // namespace pgk
