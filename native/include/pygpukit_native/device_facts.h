// A device's SM count and compute capability, read once per device: the CUTLASS entries (moe,
// mixed_gemm) run per layer, and attribute queries are host calls.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "pygpukit_native/check.h"

namespace pgk {

struct DeviceFacts {
  int sms, cc;  // cc: major * 10 + minor
};

inline DeviceFacts device_facts(int device) {
  static std::atomic<std::int64_t> cache[64] = {};
  const bool cached = device >= 0 && device < 64;
  if (cached) {
    const std::int64_t v = cache[device].load(std::memory_order_relaxed);
    if (v) return {static_cast<int>(v >> 16), static_cast<int>(v & 0xffff)};
  }
  int sms = 0, major = 0, minor = 0;
  PGK_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  PGK_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PGK_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const DeviceFacts f{sms, major * 10 + minor};
  if (cached) cache[device].store((std::int64_t{f.sms} << 16) | f.cc, std::memory_order_relaxed);
  return f;
}

}  // namespace pgk
