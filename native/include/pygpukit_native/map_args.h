// Arguments of the elementwise "map" engine (map.cuh): out[idx] = f(x0[idx], x1[idx], x2[idx])
// over an N-d index space whose dims the Python side has already collapsed (jointly contiguous
// neighbours merged, size-1 dims dropped: pygpukit/backends/native_kernels/_map.py). Pure C++,
// so the bindings include it too.
//
// Operand 0 is the output, 1..3 the inputs. An input is an array (pointer + element strides,
// 0 along broadcast dims) or a scalar (pointer 0; its value in MapScalar: the double for
// floating compute types, the int64 for integer ones, as the bits for raw-bit types).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pygpukit_native/errors.h"

namespace pgk {

constexpr int kMapDims = 6;      // collapsed dims one launch decomposes (more: split on the host)
constexpr int kMapOperands = 4;  // the output and up to three inputs

struct MapScalar {
  double f;
  std::int64_t i;
};

struct MapArgs {
  int device;
  std::uintptr_t stream;
  int nd;          // collapsed dims, 1..kMapDims
  std::int64_t n;  // elements
  // Right-aligned: the innermost dim at kMapDims - 1, unused leading dims size 1 / stride 0, so
  // kernels index these arrays with compile-time constants only.
  std::int64_t size[kMapDims];
  std::int64_t stride[kMapOperands][kMapDims];
  std::uintptr_t ptr[kMapOperands];
  MapScalar scalar[kMapOperands];
  int flags;  // op-specific (clamp: bit 0 has min, bit 1 has max)
  // Launch shape, filled in by launch_map.
  int flat, vec, tc, ilp;
  std::int64_t n_ct, tiles;
};

// Validates what Python passes (the kernels trust it): sizes outermost first, one stride list
// per operand, scalars per operand.
inline MapArgs make_map_args(int device, std::uintptr_t stream,
                             const std::vector<std::int64_t>& sizes,
                             const std::vector<std::uintptr_t>& ptrs,
                             const std::vector<std::vector<std::int64_t>>& strides,
                             const std::vector<double>& fs, const std::vector<std::int64_t>& is,
                             int flags) {
  const char* who = "map";
  const int nd = static_cast<int>(sizes.size());
  if (nd < 1 || nd > kMapDims) fail(who, "between 1 and 6 collapsed dims, got " + std::to_string(nd));
  if (ptrs.size() != static_cast<std::size_t>(kMapOperands) || strides.size() != ptrs.size() ||
      fs.size() != ptrs.size() || is.size() != ptrs.size())
    fail(who, "ptrs, strides and scalars need one entry per operand (4: out and 3 inputs)");
  if (ptrs[0] == 0) fail(who, "the output must be a device pointer");
  MapArgs a{};
  a.device = device;
  a.stream = stream;
  a.nd = nd;
  a.n = 1;
  a.flags = flags;
  for (int d = 0; d < kMapDims; ++d) a.size[d] = 1;
  for (int d = 0; d < nd; ++d) {
    if (sizes[d] < 0) fail(who, "negative size");
    a.size[kMapDims - nd + d] = sizes[d];
    a.n *= sizes[d];
  }
  for (int k = 0; k < kMapOperands; ++k) {
    if (strides[k].size() != sizes.size()) fail(who, "each stride list needs one entry per dim");
    for (int d = 0; d < nd; ++d) a.stride[k][kMapDims - nd + d] = strides[k][d];
    a.ptr[k] = ptrs[k];
    a.scalar[k] = MapScalar{fs[k], is[k]};
  }
  return a;
}

}  // namespace pgk
