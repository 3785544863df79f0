// The int4 product with each weight value rounded to x's dtype, on CUTLASS's Hopper mixed-input
// mainloop: the native kernel of op qgemm_int4_dense (pygpukit/backends/cpu/qgemm.py is the
// reference), which gp.linear_quantized's dense path takes for an int4 weight in place of
// expanding it (dequantize_weight, then cuBLASLt):
//
//   y[m, n] = sum_k x[m, k] * round_x(data[n, k] * scales[n, k / group]) + bias[n]
//
// x [M, K] float16/bfloat16 (rows x_row_stride elements apart), data int4 [N, K] (two a byte,
// low nibble first, two's complement: CUTLASS's int4b_t), scales [N, K / group] float32, float16
// or bfloat16, group 128, bias [N] of x's dtype or none, y [M, N] contiguous of x's dtype.
// Each weight is dequantized in registers as the dense path's dequantize_weight does it (the
// product in float32, rounded once to x's dtype), the products accumulate in float32, and the
// bias joins the float32 sum before the one rounding to y's dtype. (The Triton mixed-input
// kernel of op qgemm_int4 never rounds the weight; this one serves only the dense path's rows.)
//
// How: CUTLASS's mainloop takes the narrow operand as A and its scales M-major, so the call
// runs the transposed product y^T = W x^T (weights as A, [N, K] K-major; x as B; y^T stored
// column-major, which is y row-major), after one small kernel that writes the scales transposed
// ([K / group, N]: as they are when of x's dtype, else widened to float32, exactly) into the
// caller's workspace.
//
// Scratch: the caller passes `workspace` (256-byte aligned) of mixed_gemm_int4_workspace(...)
// bytes: the transposed scales and CUTLASS's own workspace. The module allocates nothing, reads
// nothing back: the call is graph-capturable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct MixedGemmArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;                 // x, bias, y: float16 or bfloat16
  std::uintptr_t x;            // [m, k], rows x_row_stride elements apart, 16-byte aligned
  std::int64_t m, k, x_row_stride;
  std::uintptr_t data;         // int4 [n, k] contiguous, 16-byte aligned
  std::int64_t n;
  std::uintptr_t scales;       // [n, groups] contiguous, groups = k / group
  DType scale_dtype;           // float32, float16 or bfloat16
  std::int64_t group;          // 128
  std::uintptr_t bias;         // 0 or [n] of dtype
  std::uintptr_t y;            // [m, n] contiguous, 16-byte aligned
  std::uintptr_t workspace;    // 256-byte aligned
  std::size_t workspace_bytes;
};

// Bytes of scratch one call with these sizes needs.
std::size_t mixed_gemm_int4_workspace(int device, DType dtype, DType scale_dtype, std::int64_t m,
                                      std::int64_t n, std::int64_t k, std::int64_t group);

void mixed_gemm_int4(const MixedGemmArgs& a);

}  // namespace pgk
