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

#include <cstddef>
#include <map>
#include <mutex>
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

// Whether the code the driver picked for `kernel` on the current device was compiled for sm_90+,
// where pdl_wait() is a real wait. A build without sm_90 code (the sm_89 PTX JIT-compiled on a
// newer GPU, or PYGPUKIT_CUDA_ARCHS without 90) compiles pdl_wait() to nothing, so such a
// kernel must never be launched early. Asked of the driver once per kernel and device.
inline bool compiled_to_wait(const void* kernel) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, bool> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(kernel, device);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  cudaFuncAttributes attr{};
  const bool ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90 &&
                  attr.binaryVersion >= 90;
  if (!ok) cudaGetLastError();  // a failed query leaves nothing behind for the next call
  known.emplace(key, ok);
  return ok;
}

// Launch kernel<<<grid, block, 0, stream>>>(args...), with programmatic stream serialization
// when pdl is set and the kernel's code waits (compiled_to_wait; the caller checked the device
// is sm_90+); returns the launch's status, with CUDA's last-error slot cleared on failure so
// the error is not reported again by the next launch of another op. The kernel must call
// pdl_wait() before its first dependent access.
// launch_kernel_smem: the same with `smem` bytes of dynamic shared memory a block, which the
// caller has allowed the kernel (allow_dynamic_smem) where it is above 48 KiB with the static.
template <typename... KArgs, typename... Args>
inline cudaError_t launch_kernel_smem(void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                      std::size_t smem, cudaStream_t stream, bool pdl,
                                      Args&&... args) {
  pdl = pdl && compiled_to_wait(reinterpret_cast<const void*>(kernel));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

template <typename... KArgs, typename... Args>
inline cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                 cudaStream_t stream, bool pdl, Args&&... args) {
  return launch_kernel_smem(kernel, grid, block, 0, stream, pdl, std::forward<Args>(args)...);
}

// Let `kernel` take up to `bytes` of dynamic shared memory on the current device (the opt-in
// above 48 KiB); asked of the driver once per kernel, device and larger size.
inline cudaError_t allow_dynamic_smem(const void* kernel, int bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> allowed;
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  std::lock_guard<std::mutex> lock(mu);
  int& have = allowed[std::make_pair(kernel, device)];
  if (bytes <= have) return cudaSuccess;
  status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return status;
  }
  have = bytes;
  return cudaSuccess;
}

}  // namespace pgk
