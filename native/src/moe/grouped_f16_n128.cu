// CUTLASS grouped GEMM instance: f16 operands, 128 x 128 x 64 tiles (grouped_gemm.cuh).
#include "moe/grouped_gemm.cuh"

PGK_GROUPED_INSTANCE(f16_n128, cutlass::half_t, 128, 64)
