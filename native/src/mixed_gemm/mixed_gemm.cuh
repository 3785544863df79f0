// CUTLASS's Hopper mixed-input GEMM (TMA loads, the narrow operand dequantized in registers and
// fed to wgmma from there, warp-specialized cooperative kernel) for int4 or fp8 e4m3 weights
// with group scales: the instances mixed_<format>_<dtype>_<scales>_n<tile>.cu include this file
// only (compile time: CUTLASS's templates).
//
// Why CUTLASS here: gp.linear_quantized's dense path (from 256 rows for int4, 512 for fp8)
// expanded the weight into x's dtype for cuBLASLt, an N x K write and read a call; CUTLASS's mainloop dequantizes the
// same rounded weight in registers, overlapping the TMA loads, the dequantization and wgmma
// across warp groups (the Triton mixed-input kernel runs at 280-460 TFLOP/s there).
//
// The product runs transposed (mixed_gemm.h): the weights are CUTLASS's A (the operand that
// goes through registers must be A for a TMA epilogue), x is B, and d^T [n, m] column-major is y
// [m, n] row-major. The bias is the epilogue's per-row (of d^T) bias, added to the float32 sum
// before the one rounding. The tile N follows m and the K split follows the problem's shape
// (mixed_gemm.cu's instance(), Config's scheduler), so a row's bits may change with the batch:
// not batch invariant.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "mixed_gemm/instances.h"
#include "pygpukit_native/check.h"

namespace pgk {
namespace mixed {

// W: the weight's element (cutlass::int4b_t or cutlass::float_e4m3_t). T: x's (and y's, the
// bias's) type, the type the weights are dequantized to for wgmma. S: the scales' type, float
// (any scale dtype, widened exactly) or T (int4 scales of x's dtype). With S = T CUTLASS
// converts the int4 values straight to T and multiplies in T (through float: q * s is exact
// there, 4 bits by 11 at most, then one rounding); with S = float the product is rounded to
// float, then to T, as dequantize_weight's float32 product is. Scales of x's dtype give the same
// bits either way (the widened path is exact for them).
// Tiles 128 (weights) x TileN (rows of x) x 64 (K: 128 bytes of T, half a scale group).
template <class W, class T, class S, int TileN>
struct Config {
  using ElementW = W;
  using ElementScale = S;
  using LayoutW = cutlass::layout::RowMajor;     // w [n, k]: K-major A
  using LayoutX = cutlass::layout::ColumnMajor;  // x [m, k]: K-major B
  using LayoutD = cutlass::layout::ColumnMajor;  // d^T [n, m] column-major = y [m, n] row-major
  static constexpr int kAlignW = 128 / cutlass::sizeof_bits<ElementW>::value;  // 16 bytes
  static constexpr int kAlignX = 128 / cutlass::sizeof_bits<T>::value;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<T>::value;
  static constexpr int kTileK = 64;

  using TileShape = cute::Shape<cute::_128, cute::Int<TileN>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<T, float, T, void, float>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, T,
      LayoutD, kAlignD, cutlass::epilogue::TmaWarpSpecializedCooperative,
      Fusion>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cute::tuple<ElementW, ElementScale>,
      LayoutW, kAlignW, T, LayoutX, kAlignX, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  // Stream-K: a deep product with few output tiles (K 14336 N 4096 is 32 weight tiles for 132
  // SMs at up to 64 rows) splits K across CTAs; full waves stay data-parallel. Partial sums are
  // added in a fixed order (ReductionMode::Deterministic, CUTLASS's default), and the split
  // follows the problem's shape and the SM count only: the same call gives the same bits.
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                      Epilogue, cutlass::gemm::StreamKScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideW = typename Kernel::StrideA;
  using StrideX = typename Kernel::StrideB;
  using StrideD = typename Kernel::StrideD;
  using StrideS = typename Mainloop::StrideScale;
};

template <class C>
typename C::Gemm::Arguments arguments(const MixedProblem& p) {
  using T = typename C::Gemm::ElementB;
  using S = typename C::ElementScale;
  const int n = static_cast<int>(p.n), m = static_cast<int>(p.m), k = static_cast<int>(p.k);
  const int groups = static_cast<int>((p.k + p.group - 1) / p.group);
  // Element strides (the unit modes are static in the stride types): w [n, k] and x [m, k]
  // K-major, d^T [n, m] column-major, the scales [groups, n] n-major.
  typename C::StrideW sw{};
  cute::get<0>(sw) = p.k;
  cute::get<2>(sw) = p.k * p.n;
  typename C::StrideX sx{};
  cute::get<0>(sx) = p.ldx;
  cute::get<2>(sx) = p.ldx * p.m;
  typename C::StrideD sd{};
  cute::get<1>(sd) = p.n;
  cute::get<2>(sd) = p.n * p.m;
  typename C::StrideS ss{};
  cute::get<1>(ss) = p.n;
  cute::get<2>(ss) = p.n * groups;
  typename C::Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = cute::make_shape(n, m, k, 1);
  args.mainloop.ptr_A = static_cast<const typename C::ElementW*>(p.w);
  args.mainloop.dA = sw;
  args.mainloop.ptr_B = static_cast<const T*>(p.x);
  args.mainloop.dB = sx;
  args.mainloop.ptr_S = static_cast<const S*>(p.scales_t);
  args.mainloop.dS = ss;
  args.mainloop.group_size = static_cast<int>(p.group);
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.thread.bias_ptr = static_cast<const T*>(p.bias);
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = sd;
  args.epilogue.ptr_D = static_cast<T*>(p.d);
  args.epilogue.dD = sd;
  args.hw_info.device_id = p.device;
  args.hw_info.sm_count = p.sm_count;
  return args;
}

inline void require_ok(cutlass::Status s, const char* what) {
  if (s != cutlass::Status::kSuccess) {
    fail("mixed_gemm", std::string("CUTLASS mixed-input GEMM ") + what + " failed: " +
                                cutlassGetStatusString(s));
  }
}

template <class C>
std::size_t workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t group,
                            int sm_count) {
  MixedProblem p{};
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldx = k;
  p.group = group;
  p.sm_count = sm_count;
  return C::Gemm::get_workspace_size(arguments<C>(p));
}

template <class C>
void run(const MixedProblem& p) {
  auto args = arguments<C>(p);
  PGK_REQUIRE_AS("mixed_gemm", C::Gemm::get_workspace_size(args) <= p.workspace_bytes,
                 "workspace too small for the mixed-input GEMM");
  typename C::Gemm gemm;
  require_ok(gemm.can_implement(args), "can_implement");
  require_ok(gemm.initialize(args, p.workspace, p.stream), "initialize");
  require_ok(gemm.run(p.stream), "launch");
  PGK_CHECK_LAUNCH("mixed_gemm GEMM");
}

}  // namespace mixed
}  // namespace pgk

// One instance a file: its two entry points for mixed_gemm.cu.
#define PGK_MIXED_INSTANCE(NAME, W, T, S, TILE_N)                                            \
  namespace pgk {                                                                            \
  using MixedConfig_##NAME = mixed::Config<W, T, S, TILE_N>;                                 \
  std::size_t mixed_workspace_##NAME(std::int64_t m, std::int64_t n, std::int64_t k,         \
                                     std::int64_t group, int sm_count) {                     \
    return mixed::workspace_bytes<MixedConfig_##NAME>(m, n, k, group, sm_count);             \
  }                                                                                          \
  void mixed_run_##NAME(const MixedProblem& p) { mixed::run<MixedConfig_##NAME>(p); }        \
  }
