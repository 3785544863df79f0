// CUTLASS mixed-input GEMM instance: fp8 e4m3 weights, float16 x, float32 scales, 128 x 64 x 64
// tiles (mixed_gemm.cuh).
#include "mixed_gemm/mixed_gemm.cuh"

PGK_MIXED_INSTANCE(e4m3_f16_f32s_n64, cutlass::float_e4m3_t, cutlass::half_t, float, 64)
