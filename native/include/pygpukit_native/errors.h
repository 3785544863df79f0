// Exceptions of the native module, free of CUDA headers so the bindings (plain C++) see them.
// pybind11 maps std::invalid_argument to ValueError; CudaError is registered as
// _pygpukit_native.CudaError (a RuntimeError).
#pragma once

#include <stdexcept>
#include <string>

namespace pgk {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* func, const std::string& what) {
  throw std::invalid_argument(std::string(func) + ": " + what);
}

}  // namespace pgk
