// CUTLASS mixed-input GEMM instance: int4 weights, float16 x, float16 scales, 128 x 64 x 64
// tiles (mixed_gemm.cuh).
#include "mixed_gemm/mixed_gemm.cuh"

PGK_MIXED_INSTANCE(int4_f16_xs_n64, cutlass::int4b_t, cutlass::half_t, cutlass::half_t, 64)
