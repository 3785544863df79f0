// The one error choke point of the native module (docs/design.md convention 3): every CUDA runtime
// status goes through check(), which names the call, the error and the place. Argument checks
// that repeat the Python-side validation (docs/design.md: "asserted again in C++") use require().
#pragma once

#include <cuda_runtime.h>

#include "pygpukit_native/errors.h"

#include <cstdint>
#include <string>

namespace pgk {

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw CudaError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                    cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
  }
}

// Make `device`'s primary context current (the one pygpukit, torch and Triton share) unless it
// already is; cudart then launches into that context.
inline void use_device(int device) {
  int cur = -1;
  check(cudaGetDevice(&cur), "cudaGetDevice", __FILE__, __LINE__);
  if (cur != device) check(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
}

template <typename T>
inline T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

inline cudaStream_t as_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

}  // namespace pgk

#define PGK_CHECK(call) ::pgk::check((call), #call, __FILE__, __LINE__)
// After a <<<>>> launch: a bad configuration shows up here, not at the next sync.
#define PGK_CHECK_LAUNCH(name) ::pgk::check(cudaGetLastError(), name, __FILE__, __LINE__)
// PGK_REQUIRE names the error after the enclosing function, which is the op only in an op's
// own entry point; a helper shared by several ops (or a lambda, whose __func__ is "operator()")
// uses PGK_REQUIRE_AS with the op's name passed down, so the user reads the op they called.
#define PGK_REQUIRE_AS(who, cond, what)      \
  do {                                       \
    if (!(cond)) ::pgk::fail((who), (what)); \
  } while (0)
#define PGK_REQUIRE(cond, what) PGK_REQUIRE_AS(__func__, cond, what)
