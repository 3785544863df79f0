// The product with the quantized weight rounded to x's dtype, on CUTLASS's Hopper mixed-input
// mainloop: the native kernel of ops qgemm_int4_dense and qgemm_fp8_dense
// (pygpukit/backends/cpu/qgemm.py is the reference), which gp.linear_quantized's dense path
// takes in place of expanding the weight (dequantize_weight, then cuBLASLt):
//
//   y[m, n] = sum_k x[m, k] * round_x(data[n, k] * scale(n, k)) + bias[n]
//
// x [M, K] float16/bfloat16 (rows x_row_stride elements apart), bias [N] of x's dtype or none,
// y [M, N] contiguous of x's dtype, and the weight:
//   int4: data int4 [N, K] (two a byte, low nibble first, two's complement: CUTLASS's
//         int4b_t), scales [N, K / 128] float32, float16 or bfloat16 (block 128);
//   fp8:  data float8_e4m3fn [N, K], scales float32 [N] (block 0: one an output channel) or
//         [N, K / 128] (block 128).
// Each weight is dequantized in registers as the dense path's dequantize_weight does it on the
// GPU (code * scale rounded to float32, then to x's dtype: with float32 scales one ulp of x's
// dtype off the exact product's single rounding in rare ties, as there), the products
// accumulate in float32, and the bias joins the float32 sum before the one rounding to y's
// dtype. (The Triton mixed-input kernel of ops qgemm_int4 / qgemm_fp8 never rounds the weight;
// this one serves only the dense path's rows.)
//
// How: CUTLASS's mainloop takes the narrow operand as A and its scales M-major, so the call
// runs the transposed product y^T = W x^T (weights as A, [N, K] K-major; x as B; y^T stored
// column-major, which is y row-major). Per-channel scales are one group of K ([N] is already
// N-major); 128-block scales go first through one small kernel that writes them transposed
// ([K / 128, N]: as they are when of x's dtype, else widened to float32, exactly) into the
// caller's workspace.
//
// Scratch: the caller passes `workspace` (256-byte aligned) of mixed_gemm_workspace(...) bytes:
// the transposed scales and CUTLASS's own workspace. The module allocates nothing, reads
// nothing back: the call is graph-capturable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pygpukit_native/dtype.h"

namespace pgk {

enum class MixedFormat { int4, fp8 };

struct MixedGemmArgs {
  int device;
  std::uintptr_t stream;
  MixedFormat format;
  DType dtype;                 // x, bias, y: float16 or bfloat16
  std::uintptr_t x;            // [m, k], rows x_row_stride elements apart, 16-byte aligned
  std::int64_t m, k, x_row_stride;
  std::uintptr_t data;         // [n, k] contiguous, 16-byte aligned
  std::int64_t n;
  std::uintptr_t scales;       // [n, k / 128] contiguous, or [n] (fp8, block 0)
  DType scale_dtype;           // int4: float32, float16 or bfloat16; fp8: float32
  std::int64_t block;          // 128, or 0 (fp8 per-channel scales)
  std::uintptr_t bias;         // 0 or [n] of dtype
  std::uintptr_t y;            // [m, n] contiguous, 16-byte aligned
  std::uintptr_t workspace;    // 256-byte aligned
  std::size_t workspace_bytes;
};

MixedFormat mixed_format_from_name(const std::string& name);  // ValueError for others

// Bytes of scratch one call with these sizes needs.
std::size_t mixed_gemm_workspace(int device, MixedFormat format, DType dtype, DType scale_dtype,
                                 std::int64_t m, std::int64_t n, std::int64_t k,
                                 std::int64_t block);

void mixed_gemm(const MixedGemmArgs& a);

}  // namespace pgk
