// Reductions sum, mean, max, min, argmax: the native twins of pygpukit/triton_kernels/reduce.py,
// numerics of pygpukit/backends/cpu/reduce.py: floats accumulate in float32 (float64 for
// float64) and round once; integer/bool sums accumulate in int64 (wrapping, order-independent);
// integer means accumulate in float64; max/min propagate NaN; argmax returns the first index of
// the maximum, a NaN counting as the largest.
//
// The Python side (pygpukit/backends/native_kernels/reduce.py) views the input as [A, K, B]
// (A kept dims before the reduced ones, K reduced, B kept after; each a single strided dim) and
// picks the thread layout and the split of K. A block of kt x bt threads reduces bt outputs:
// each thread accumulates a strided run of K (four independent accumulators), then the block
// combines the kt partials of each output in a fixed tree in shared memory - deterministic, no
// atomics. When the outputs are too few to fill the GPU, K is split over `splits` blocks that
// write partials [A, splits, B] (the accumulator type for sums; the input type, exact, for
// max/min/argmax, with int64 indices) and a second launch reduces those.
#pragma once

#include <cstdint>
#include <string>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct ReduceArgs {
  int device;
  std::uintptr_t stream;
  DType in;   // x's dtype
  DType out;  // y's dtype (final: the result's; partial: the workspace's)
  std::int64_t A, K, B, sa, sk, sb;  // x[a * sa + k * sk + b * sb], element strides
  std::uintptr_t x, xi;              // xi: int64 indices beside x (argmax's second pass), or 0
  std::uintptr_t y, yi;              // final: y[a * B + b]; partial: y[(a * splits + s) * B + b]
  int kt, bt;                        // threads along K and along B (powers of two, kt * bt <= 256)
  bool kfast;                        // neighbouring threads step along K (else along B)
  std::int64_t splits, k_chunk;      // K split into chunks of k_chunk
  double count;                      // mean's divisor (the full K)
  bool final;
};

void reduce(const std::string& op, const ReduceArgs& r);

// Kernel parameters (by value) and the per-group launchers (one .cu each).
struct RedParams {
  const void* x;
  const std::int64_t* xi;
  void* y;
  std::int64_t* yi;
  DType ydt;
  std::int64_t A, K, B, sa, sk, sb, S, k_chunk, n_bt, tiles;
  int kt, bt, kfast, final, divide, is_min;
  double count;
};

struct RedLaunch {
  int device;
  std::uintptr_t stream;
  unsigned blocks, threads;
};

bool reduce_sum(const std::string& op, DType in, const RedParams& p, const RedLaunch& l);
bool reduce_extreme(const std::string& op, DType in, const RedParams& p, const RedLaunch& l);

}  // namespace pgk
