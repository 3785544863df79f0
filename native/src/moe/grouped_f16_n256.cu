// CUTLASS grouped GEMM instance: f16 operands, 128 x 256 x 64 tiles (grouped_gemm.cuh).
#include "moe/grouped_gemm.cuh"

PGK_GROUPED_INSTANCE(f16_n256, cutlass::half_t, Cooperative, 256, 64)
