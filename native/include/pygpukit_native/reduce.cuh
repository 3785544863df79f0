// Warp and block reductions for row kernels: warp shuffles, then one value per warp through
// shared memory.
#pragma once

namespace pgk {

template <typename C>
__device__ inline C warp_sum(C v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Max over the warp; NaN inputs are not propagated reliably (callers that care track NaN apart,
// as the attention kernels do).
template <typename C>
__device__ inline C warp_max(C v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const C o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Every thread of the block gets the sum. `scratch` holds 32 values; the trailing barrier lets a
// caller reuse it for the next reduction.
template <typename C>
__device__ inline C block_sum(C v, C* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  C t = lane < warps ? scratch[lane] : C(0);
  t = warp_sum(t);
  __syncthreads();
  return t;
}

}  // namespace pgk
