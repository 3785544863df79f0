// CUTLASS grouped GEMM instance: f16 operands, 64 x 128 x 64 tiles, ping-pong (grouped_gemm.cuh).
#include "moe/grouped_gemm.cuh"

PGK_GROUPED_INSTANCE(f16_n128, cutlass::half_t, Pingpong, 128, 64)
