// A device's SM count and compute capability, read once per device: the CUTLASS entries (moe,
// mixed_gemm) run per layer, and attribute queries are host calls.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "pygpukit_native/check.h"

namespace pgk {

struct DeviceFacts {
  int sms, cc;  // cc: major * 10 + minor
};

inline DeviceFacts device_facts(int device);

// Makes `device` current and returns its facts, refusing (by `who`'s name) any device but a
// compute capability 9.0 one: `kernel` (a CUTLASS sm_90a build) exists only there.
inline DeviceFacts hopper_device(const char* who, int device, const char* kernel) {
  use_device(device);
  const DeviceFacts dev = device_facts(device);
  PGK_REQUIRE_AS(who, dev.cc == 90,
                 std::string(kernel) + " is built for sm_90a (Hopper); device has compute "
                 "capability " + std::to_string(dev.cc / 10) + "." + std::to_string(dev.cc % 10));
  return dev;
}

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
