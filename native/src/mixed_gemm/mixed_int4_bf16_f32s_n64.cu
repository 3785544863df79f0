// CUTLASS mixed-input GEMM instance: int4 weights, bfloat16 x, float32 scales, 128 x 64 x 64
// tiles (mixed_gemm.cuh).
#include "mixed_gemm/mixed_gemm.cuh"

PGK_MIXED_INSTANCE(int4_bf16_f32s_n64, cutlass::int4b_t, cutlass::bfloat16_t, float, 64)
