// Programmatic dependent launch (sm_90+) for native kernels, the mechanism the Triton kernels use
// through their driver's launch_pdl (pygpukit/backends/_support/pdl.py says when it is on).
//
// A kernel launched with launch_kernel(..., pdl = true) may become resident while the kernel
// before it on the stream is still running, once that kernel has released its dependents or
// ended. Before it reads anything an earlier kernel of the stream may write, and before it
// writes anything, it calls pdl_wait(), which returns once the kernels ahead have completed
// and their writes are visible; it then calls pdl_release() so the kernel after it may start
// early in turn. Reads of memory no kernel in flight writes (a model's weights, under the
// engine's constant_weights() promise) may be issued before the wait: that is what hides the
// launch and ramp-up of one product behind the tail of the one before.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace pgk {

// Wait for the kernels ahead on the stream (a no-op before sm_90, where nothing launches early).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Let the kernel after this one on the stream start (its own pdl_wait still orders its reads).
__device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launch kernel<<<grid, block, 0, stream>>>(args...), with programmatic stream serialization
// when pdl is set (the caller checked the device is sm_90+); returns the launch's status. The
// kernel must call pdl_wait() before its first dependent access when launched so.
template <typename... KArgs, typename... Args>
inline cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                 cudaStream_t stream, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace pgk
