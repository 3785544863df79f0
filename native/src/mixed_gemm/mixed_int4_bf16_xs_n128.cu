// CUTLASS mixed-input GEMM instance: int4 weights, bfloat16 x, bfloat16 scales, 128 x 128 x 64
// tiles (mixed_gemm.cuh).
#include "mixed_gemm/mixed_gemm.cuh"

PGK_MIXED_INSTANCE(int4_bf16_xs_n128, cutlass::int4b_t, cutlass::bfloat16_t, cutlass::bfloat16_t, 128)
