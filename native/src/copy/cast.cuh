// Shared by the cast_*.cu files: one map-engine kernel per (source, destination) pair; the
// conversion itself is the engine's store (convert<Out>(In)).
#pragma once

#include "pygpukit_native/map.cuh"

namespace pgk {
namespace cp {

struct Identity {
  template <typename C>
  __device__ C operator()(C x, C, C) const {
    return x;
  }
};

template <typename S>
void cast_to(const MapArgs& a, DType out) {
  dispatch_any(out, "cast", [&](auto d) {
    using D = decltype(d);
    if constexpr (std::is_same_v<S, D>) {
      fail("cast", "a cast to the same dtype is a copy (op 'copy')");
    } else {
      launch_map<Identity, S, S, S, D>(a, Identity{}, "cast");
    }
  });
}

}  // namespace cp
}  // namespace pgk
