// The CUTLASS mixed-input GEMM instances the entry (mixed_gemm.cu) dispatches to, behind a plain
// C++ interface so that only the instance files (mixed_*.cu) compile CUTLASS's templates.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pgk {

// One instance is (weight format, x dtype, scale type, tile N): d^T = (w * s) x^T for one
// problem: w int4 or fp8 e4m3 [n, k], s [ceil(k / group), n] (n-major) float32 (the _f32s
// instances) or of x's dtype (_xs), x [m, k] rows ldx apart, d [m, n] rows n apart, bias [n] or
// null.
struct MixedProblem {
  int device;
  cudaStream_t stream;
  int sm_count;
  const void* x;
  std::int64_t m, k, ldx;
  const void* w;
  std::int64_t n;
  const void* scales_t;
  std::int64_t group;
  const void* bias;
  void* d;
  void* workspace;  // CUTLASS's, workspace_bytes(...) of it
  std::size_t workspace_bytes;
};

#define PGK_MIXED_INSTANCE_DECL(NAME)                                                    \
  std::size_t mixed_workspace_##NAME(std::int64_t m, std::int64_t n, std::int64_t k,     \
                                     std::int64_t group, int sm_count);                  \
  void mixed_run_##NAME(const MixedProblem& p);

PGK_MIXED_INSTANCE_DECL(int4_bf16_f32s_n64)
PGK_MIXED_INSTANCE_DECL(int4_bf16_f32s_n128)
PGK_MIXED_INSTANCE_DECL(int4_bf16_xs_n64)
PGK_MIXED_INSTANCE_DECL(int4_bf16_xs_n128)
PGK_MIXED_INSTANCE_DECL(int4_f16_f32s_n64)
PGK_MIXED_INSTANCE_DECL(int4_f16_f32s_n128)
PGK_MIXED_INSTANCE_DECL(int4_f16_xs_n64)
PGK_MIXED_INSTANCE_DECL(int4_f16_xs_n128)
PGK_MIXED_INSTANCE_DECL(e4m3_bf16_f32s_n64)
PGK_MIXED_INSTANCE_DECL(e4m3_bf16_f32s_n128)
PGK_MIXED_INSTANCE_DECL(e4m3_f16_f32s_n64)
PGK_MIXED_INSTANCE_DECL(e4m3_f16_f32s_n128)

#undef PGK_MIXED_INSTANCE_DECL

}  // namespace pgk
