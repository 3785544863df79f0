// The Hopper ptr-array grouped GEMM (CUTLASS 3.x: TMA loads, wgmma, warp-specialized kernels,
// persistent group tile scheduler) and the device-side setup of its groups. Included by
// the instance files grouped_<dtype>_n<tile>.cu only (compile time: CUTLASS templates).
//
// Why CUTLASS here: cuBLASLt has no grouped GEMM whose problem sizes live in device memory, and
// a MoE step must not read its routing on the host (CUDA-graph decode). CUTLASS's group
// scheduler reads each group's (M, N, K) from device memory, so a group of M = 0 (an expert no
// token chose) costs nothing and the launch needs no host-side counts.
//
// Tiles: one CTA a cluster, as many pipeline stages as shared memory holds after the
// epilogue's. Big groups (block_m >= 64): the cooperative schedule on 128 x 256 x 64 tiles.
// Short groups (decode): the ping-pong schedule on 64 x 128 x 64 tiles (two consumer
// warpgroups on separate tiles, one's epilogue under the other's mainloop). Measured on an H100
// (benchmarks/moe.py, same machine, two builds): ping-pong 64 x 128 x 64 was faster than
// cooperative 128 x 128 x 64 in 4 of 5 short-group layer cases (Mixtral-8x7B one token 338.7
// against 375.2 us, 16 tokens 1130 against 1214 us); cooperative 128 x 64 x 128 was 1.22-1.41x
// slower than cooperative 128 x 128 x 64.
// The entry picks the tile from block_m only, and no tile splits K, so under a fixed block_m
// (the deterministic mode's) a row's result never depends on the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "moe/grouped_gemm.h"
#include "pygpukit_native/check.h"

namespace pgk {
namespace grouped {

// The two warp-specialized schedules: cooperative (both consumer warpgroups on one 128-row
// tile) and ping-pong (each consumer warpgroup on its own 64-row tile, their mainloops and
// epilogues interleaved).
struct Cooperative {
  static constexpr int kTileM = 128;
  using Kernel = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
};
struct Pingpong {
  static constexpr int kTileM = 64;
  using Kernel = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

template <class T, class Schedule, int TileN, int TileK>
struct Config {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using TileShape =
      cute::Shape<cute::Int<Schedule::kTileM>, cute::Int<TileN>, cute::Int<TileK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 8;  // 16 bytes of 16-bit elements: TMA's row alignment
  static constexpr int kAlignD = 4;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD,
      float, LayoutD*, kAlignD, typename Schedule::Epilogue,
      cutlass::epilogue::fusion::LinearCombination<float, float, void, float>>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, LayoutA*, kAlignAB, T, LayoutB*,
      kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

// The per-group arrays CUTLASS reads, carved from the caller's scratch (256-byte aligned
// pieces), then CUTLASS's own workspace.
template <class C>
struct Meta {
  using T = typename C::Gemm::ElementA;
  typename C::Shape3* problems;
  const T** a;
  const T** b;
  float** d;
  typename C::StrideA* sa;
  typename C::StrideB* sb;
  typename C::StrideD* sd;
  char* workspace;
  std::size_t used;  // bytes before the workspace

  Meta(void* base, int groups) {
    std::size_t off = 0;
    // Integer arithmetic on the address: meta_bytes() lays out a null base to size it.
    const auto base_addr = reinterpret_cast<std::uintptr_t>(base);
    auto take = [&](std::size_t bytes) {
      char* p = reinterpret_cast<char*>(base_addr + off);
      off += (bytes + 255) / 256 * 256;
      return p;
    };
    const auto g = static_cast<std::size_t>(groups);
    problems = reinterpret_cast<typename C::Shape3*>(take(g * sizeof(typename C::Shape3)));
    a = reinterpret_cast<const T**>(take(g * sizeof(T*)));
    b = reinterpret_cast<const T**>(take(g * sizeof(T*)));
    d = reinterpret_cast<float**>(take(g * sizeof(float*)));
    sa = reinterpret_cast<typename C::StrideA*>(take(g * sizeof(typename C::StrideA)));
    sb = reinterpret_cast<typename C::StrideB*>(take(g * sizeof(typename C::StrideB)));
    sd = reinterpret_cast<typename C::StrideD*>(take(g * sizeof(typename C::StrideD)));
    workspace = take(0);
    used = off;
  }
};

// One CTA: each expert's run of blocks [first, last) from the block -> expert map, then each
// group's problem and pointers. Group g < E is expert g with w; g >= E (gated) is expert g - E
// with w_up. For any block_expert values the spans stay inside [0, nb) blocks, so the GEMM
// reads and writes only slots that exist (an expert listed in two runs gets some span of
// valid slots; moe_align never produces that).
template <class C, class T>
__global__ void setup_groups(const std::int32_t* be, std::int64_t nb, std::int64_t bm, int experts,
                             int n, int k, bool gated, const T* xg, const T* w, const T* wu,
                             float* dg, float* du, typename C::Shape3* problems, const T** pa,
                             const T** pb, float** pd, typename C::StrideA* sa,
                             typename C::StrideB* sb, typename C::StrideD* sd) {
  extern __shared__ int span[];  // [2 E]: first block, one past the last
  for (int e = threadIdx.x; e < 2 * experts; e += blockDim.x) span[e] = 0;
  __syncthreads();
  for (std::int64_t blk = threadIdx.x; blk < nb; blk += blockDim.x) {
    const int e = be[blk];
    if (e < 0 || e >= experts) continue;
    if (blk == 0 || be[blk - 1] != e) span[e] = static_cast<int>(blk);
    if (blk == nb - 1 || be[blk + 1] != e) span[experts + e] = static_cast<int>(blk) + 1;
  }
  __syncthreads();
  const int groups = gated ? 2 * experts : experts;
  for (int g = threadIdx.x; g < groups; g += blockDim.x) {
    const bool up = g >= experts;
    const int e = up ? g - experts : g;
    const int first = span[e], last = span[experts + e];
    const std::int64_t m = last > first ? (last - first) * bm : 0;
    const std::int64_t s0 = m ? first * bm : 0;
    problems[g] = cute::make_shape(static_cast<int>(m), n, k);
    pa[g] = xg + s0 * k;
    pb[g] = (up ? wu : w) + static_cast<std::int64_t>(e) * n * k;
    pd[g] = (up ? du : dg) + s0 * n;
    typename C::StrideA a{};
    typename C::StrideB b{};
    typename C::StrideD d{};
    cute::get<0>(a) = k;  // A [M, K] row-major: K elements between rows
    cute::get<0>(b) = k;  // B (N, K) with K contiguous
    cute::get<0>(d) = n;  // D [M, N] row-major
    sa[g] = a;
    sb[g] = b;
    sd[g] = d;
  }
}

template <class C>
typename C::Gemm::Arguments arguments(const Meta<C>& meta, int groups, int device, int sm_count) {
  typename C::Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {groups, meta.problems, nullptr};  // sizes on the device only
  args.mainloop = {meta.a, meta.sa, meta.b, meta.sb};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = nullptr;
  args.epilogue.ptr_D = meta.d;
  args.epilogue.dD = meta.sd;
  args.hw_info.device_id = device;
  args.hw_info.sm_count = sm_count;
  return args;
}

template <class C>
std::size_t meta_bytes(int groups, int sm_count) {
  Meta<C> meta(nullptr, groups);
  return meta.used + C::Gemm::get_workspace_size(arguments(meta, groups, 0, sm_count));
}

inline void require_ok(cutlass::Status s, const char* what) {
  if (s != cutlass::Status::kSuccess) {
    fail("moe_grouped", std::string("CUTLASS grouped GEMM ") + what + " failed: " +
                            cutlassGetStatusString(s));
  }
}

template <class C>
void run(const GroupedProblem& p) {
  using T = typename C::Gemm::ElementA;
  const int groups = p.gated ? 2 * p.experts : p.experts;
  Meta<C> meta(p.meta, groups);
  auto args = arguments(meta, groups, p.device, p.sm_count);
  const std::size_t ws = C::Gemm::get_workspace_size(args);
  PGK_REQUIRE_AS("moe_grouped", meta.used + ws <= p.meta_bytes,
                 "workspace too small for the grouped GEMM's arrays");
  setup_groups<C, T><<<1, 1024, 2 * p.experts * sizeof(int), p.stream>>>(
      p.block_expert, p.nb, p.block_m, p.experts, static_cast<int>(p.n), static_cast<int>(p.k),
      p.gated, static_cast<const T*>(p.xg), static_cast<const T*>(p.w),
      static_cast<const T*>(p.w_up), p.dg, p.du, meta.problems, meta.a, meta.b, meta.d, meta.sa,
      meta.sb, meta.sd);
  PGK_CHECK_LAUNCH("moe_grouped setup_groups");
  typename C::Gemm gemm;
  require_ok(gemm.can_implement(args), "can_implement");
  require_ok(gemm.initialize(args, ws ? meta.workspace : nullptr, p.stream), "initialize");
  require_ok(gemm.run(p.stream), "launch");
  PGK_CHECK_LAUNCH("moe_grouped grouped GEMM");
}

}  // namespace grouped
}  // namespace pgk

// One instance a file: its two entry points for moe.cu.
#define PGK_GROUPED_INSTANCE(NAME, T, SCHEDULE, TILE_N, TILE_K)                           \
  namespace pgk {                                                                        \
  using Config_##NAME = grouped::Config<T, grouped::SCHEDULE, TILE_N, TILE_K>;           \
  std::size_t grouped_meta_bytes_##NAME(int groups, int sm_count) {                      \
    return grouped::meta_bytes<Config_##NAME>(groups, sm_count);                         \
  }                                                                                      \
  void grouped_run_##NAME(const GroupedProblem& p) { grouped::run<Config_##NAME>(p); }   \
  }
