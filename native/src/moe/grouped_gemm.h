// The CUTLASS grouped GEMM instances the MoE entry (moe.cu) dispatches to, behind a plain C++
// interface so that only the instance files (grouped_*.cu) compile CUTLASS's templates.
//
// One instance is (element type, tile N): d[g] = a[g] @ b[g]^T for every group g, a [M_g, K]
// row-major, b [N, K] row-major (column-major K x N for CUTLASS), d [M_g, N] float32
// row-major, float32 accumulation. The groups' problems and pointers are built on the device
// from moe_align's block -> expert map (grouped_gemm.cuh setup_groups), then the kernel runs
// with no host copy of the problem sizes: graph-capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pgk {

struct GroupedProblem {
  int device;
  cudaStream_t stream;
  int sm_count;
  const std::int32_t* block_expert;  // [nb]; an expert's blocks are one contiguous run
  std::int64_t nb, block_m;
  int experts;
  std::int64_t n, k;
  bool gated;       // 2E groups: d_g from w, then d_u from w_up
  const void* xg;   // [nb * block_m, k]: slot s's x row
  const void* w;    // [E, n, k]
  const void* w_up;
  float* dg;        // [nb * block_m, n]
  float* du;
  void* meta;       // per-group arrays and CUTLASS's workspace: meta_bytes(...) bytes
  std::size_t meta_bytes;
};

#define PGK_GROUPED_INSTANCE_DECL(NAME)                              \
  std::size_t grouped_meta_bytes_##NAME(int groups, int sm_count);   \
  void grouped_run_##NAME(const GroupedProblem& p);

PGK_GROUPED_INSTANCE_DECL(bf16_n128)
PGK_GROUPED_INSTANCE_DECL(bf16_n256)
PGK_GROUPED_INSTANCE_DECL(f16_n128)
PGK_GROUPED_INSTANCE_DECL(f16_n256)

#undef PGK_GROUPED_INSTANCE_DECL

}  // namespace pgk
