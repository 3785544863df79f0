// The grouped expert product of a mixture-of-experts layer on CUTLASS's Hopper ptr-array grouped
// GEMM: the native twin of pygpukit/backends/triton_kernels/moe.py's moe_linear, same contract
// (pygpukit/ops/moe.py; pygpukit/backends/cpu/moe.py is the reference).
//
// Inputs are moe_align's layout: `rows` [nb * block_m] lists routed rows grouped by expert (one
// contiguous run of blocks an expert, the sentinel R for padding) and `block_expert` [nb] names
// each block's expert (-1 past the last block, `experts` for out-of-range ids). One call:
//   1. gathers slot s's x row (x[rows[s] / top_k], zeros for padding) into xg [P, K];
//   2. turns the block -> expert map into one GEMM problem a group (its M is the group's slots;
//      an expert with no block gets M = 0) on the device, so nothing waits for the counts and
//      the call is graph-capturable;
//   3. runs the grouped GEMM  d_g[slot] = xg[slot] @ w[e]^T  (and d_u with w_up: 2E groups in one
//      launch), float32 accumulators stored as float32;
//   4. writes y[rows[s]] = silu(d_g) * d_u (or d_g) times row_scale[rows[s]], rounded once to
//      x's dtype; blocks of the out-of-range group write zeros.
// So the result rounds once from float32 sums, as the Triton twin's does.
//
// Scratch: the caller passes `workspace` (256-byte aligned) of moe_grouped_workspace(...) bytes:
// xg (P K elements), d_g and d_u (P N float32 each; about 1 GB for a Mixtral-8x7B layer's gate/up
// at 4096 tokens), the per-group problem/pointer/stride arrays and CUTLASS's own workspace. The
// module allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct MoeGroupedArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;                   // x, w, w_up and y: float16 or bfloat16
  std::uintptr_t x;              // [T, K], rows x_row_stride elements apart, 16-byte aligned
  std::int64_t x_rows, x_row_stride;
  std::int64_t top_k;            // slot s reads x[rows[s] / top_k]
  std::uintptr_t w, w_up;        // [E, N, K] contiguous; w_up 0 for the ungated form
  std::int64_t experts, n, k;
  std::uintptr_t rows;           // int32 [nb * block_m]
  std::uintptr_t block_expert;   // int32 [nb]
  std::int64_t nb, block_m;
  std::uintptr_t row_scale;      // 0 or float32 [R], R = x_rows * top_k
  std::uintptr_t y;              // [R, n] contiguous, 16-byte aligned
  std::uintptr_t workspace;  // 256-byte aligned
  std::size_t workspace_bytes;
};

// Bytes of scratch one call with these sizes needs (tile_n: the CUTLASS tile the call uses,
// moe_grouped_tile_n(block_m)).
std::size_t moe_grouped_workspace(int device, DType dtype, std::int64_t experts, std::int64_t n,
                                  std::int64_t k, std::int64_t slots, bool gated,
                                  std::int64_t block_m);

void moe_grouped(const MoeGroupedArgs& a);

}  // namespace pgk
