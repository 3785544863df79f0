// Rotary position embedding (RoFormer): the native twin of pygpukit/triton_kernels/rope.py, same
// numerics (pygpukit/backends/cpu/rope.py): (a, b) -> (a cos - b sin, b cos + a sin) in float32
// (float64 for float64 x), one rounding at the store; dims 2*half..d-1 pass through.
// x and y are [..., S, H, D] with D contiguous: token t (flat over the leading dims) is
// (b, s) = (t / S, t % S) and starts at x + b * sxb + s * sxs; head h at + h * sxh.
// Positions (int32/int64) are addressed the same way (b * spb + s * sps); without them the
// position is s. A position outside [0, max_pos) makes that token's rotated dims NaN.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct RopeArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;        // x and y
  DType table_dtype;  // cos and sin: x's dtype or float32
  DType pos_dtype;    // int32 or int64 (ignored without positions)
  std::int64_t tokens, s, heads, d, half;
  std::uintptr_t x;
  std::int64_t sxb, sxs, sxh;
  std::uintptr_t y;
  std::int64_t syb, sys, syh;
  std::uintptr_t pos;  // 0: position = s
  std::int64_t spb, sps;
  std::uintptr_t cos, sin;
  std::int64_t max_pos, scr, scc, ssr, ssc;  // table rows and (row, column) element strides
  bool gptj;       // pairs (2i, 2i+1); else neox (i, i + half)
  bool copy_tail;  // copy dims 2*half..d-1 into y (false when y is x)
};

void rope(const RopeArgs& a);

}  // namespace pgk
