// CUTLASS grouped GEMM instance: bf16 operands, 128 x 256 x 64 tiles (grouped_gemm.cuh).
#include "moe/grouped_gemm.cuh"

PGK_GROUPED_INSTANCE(bf16_n256, cutlass::bfloat16_t, Cooperative, 256, 64)
