// CUTLASS grouped GEMM instance: bf16 operands, 64 x 128 x 64 tiles, ping-pong (grouped_gemm.cuh).
#include "moe/grouped_gemm.cuh"

PGK_GROUPED_INSTANCE(bf16_n128, cutlass::bfloat16_t, Pingpong, 128, 64)
