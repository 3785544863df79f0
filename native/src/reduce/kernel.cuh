// The reduction kernel (see reduce.h for the scheme) and its three accumulator kinds.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "pygpukit_native/check.h"
#include "pygpukit_native/numeric.cuh"
#include "reduce/reduce.h"

namespace pgk {
namespace red {

template <typename Acc>
struct SumOp {
  static constexpr bool kIndex = false;
  struct St {
    Acc v;
  };
  __device__ static St init(const RedParams&) { return St{Acc(0)}; }
  __device__ static void add(St& s, Acc v, std::int64_t, const RedParams&) {
    if constexpr (std::is_integral_v<Acc>) {
      s.v = wrap_add(s.v, v);  // int64 sums wrap like NumPy's
    } else {
      s.v += v;
    }
  }
  __device__ static void merge(St& s, const St& o, const RedParams& p) { add(s, o.v, 0, p); }
};

// max or min (p.is_min), NaN-propagating.
template <typename Acc>
struct ExtremeOp {
  static constexpr bool kIndex = false;
  struct St {
    Acc v;
  };
  __device__ static St init(const RedParams& p) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return St{p.is_min ? std::numeric_limits<Acc>::infinity() : -std::numeric_limits<Acc>::infinity()};
    } else {
      return St{p.is_min ? std::numeric_limits<Acc>::max() : std::numeric_limits<Acc>::lowest()};
    }
  }
  __device__ static void add(St& s, Acc v, std::int64_t, const RedParams& p) {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (s.v != s.v) return;
      if (v != v) {
        s.v = v;
        return;
      }
    }
    s.v = p.is_min ? (v < s.v ? v : s.v) : (v > s.v ? v : s.v);
  }
  __device__ static void merge(St& s, const St& o, const RedParams& p) { add(s, o.v, 0, p); }
};

// First index of the maximum; a NaN is larger than any number, the first NaN wins. The order is
// total (value, then lower index), so any combination order gives the same answer.
template <typename Acc>
struct ArgMaxOp {
  static constexpr bool kIndex = true;
  struct St {
    Acc v;
    std::int64_t i;  // -1: nothing seen yet
  };
  __device__ static St init(const RedParams&) { return St{Acc(0), -1}; }
  __device__ static bool better(Acc v, std::int64_t i, const St& s) {
    if (s.i < 0) return true;
    bool gt = v > s.v, eq = v == s.v;
    if constexpr (std::is_floating_point_v<Acc>) {
      const bool vn = v != v, sn = s.v != s.v;
      gt = (vn && !sn) || gt;
      eq = (vn && sn) || eq;
    }
    return gt || (eq && i < s.i);
  }
  __device__ static void add(St& s, Acc v, std::int64_t i, const RedParams&) {
    if (better(v, i, s)) s = St{v, i};
  }
  __device__ static void merge(St& s, const St& o, const RedParams&) {
    if (o.i >= 0 && better(o.v, o.i, s)) s = o;
  }
};

constexpr int kMaxThreads = 256;

template <typename Op, typename In, typename Acc>
__global__ void __launch_bounds__(kMaxThreads) reduce_kernel(RedParams p) {
  using St = typename Op::St;
  __shared__ St sm[kMaxThreads];
  const int tid = threadIdx.x;
  const int kl = p.kfast ? (tid & (p.kt - 1)) : (tid / p.bt);
  const int bl = p.kfast ? (tid / p.kt) : (tid & (p.bt - 1));
  const int kstep = p.kfast ? 1 : p.bt;  // shared-memory distance of neighbouring k lanes
  const In* x = static_cast<const In*>(p.x);
  const std::int64_t kt = p.kt, sk = p.sk;
  for (std::int64_t t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const std::int64_t split = t % p.S;
    const std::int64_t t2 = t / p.S;
    const std::int64_t a = t2 / p.n_bt;
    const std::int64_t b = (t2 - a * p.n_bt) * p.bt + bl;
    St s0 = Op::init(p);
    if (b < p.B) {
      St s1 = s0, s2 = s0, s3 = s0;
      const std::int64_t k_lo = split * p.k_chunk;
      const std::int64_t k_hi = p.K < k_lo + p.k_chunk ? p.K : k_lo + p.k_chunk;
      const std::int64_t off = a * p.sa + b * p.sb;
      const In* base = x + off;
      const std::int64_t* ib = p.xi ? p.xi + off : nullptr;
      std::int64_t k = k_lo + kl;
      // Four independent accumulators: four loads in flight per thread, and shorter
      // sequential sums (the rounding error of a float sum grows with its length).
      for (; k + 3 * kt < k_hi; k += 4 * kt) {
        const std::int64_t k1 = k + kt, k2 = k1 + kt, k3 = k2 + kt;
        const Acc v0 = convert<Acc>(base[k * sk]), v1 = convert<Acc>(base[k1 * sk]);
        const Acc v2 = convert<Acc>(base[k2 * sk]), v3 = convert<Acc>(base[k3 * sk]);
        Op::add(s0, v0, ib ? ib[k * sk] : k, p);
        Op::add(s1, v1, ib ? ib[k1 * sk] : k1, p);
        Op::add(s2, v2, ib ? ib[k2 * sk] : k2, p);
        Op::add(s3, v3, ib ? ib[k3 * sk] : k3, p);
      }
      for (; k < k_hi; k += kt) Op::add(s0, convert<Acc>(base[k * sk]), ib ? ib[k * sk] : k, p);
      Op::merge(s0, s1, p);
      Op::merge(s2, s3, p);
      Op::merge(s0, s2, p);
    }
    if (p.kt > 1) {
      sm[tid] = s0;
      __syncthreads();
      for (int s = p.kt >> 1; s > 0; s >>= 1) {
        if (kl < s) {
          Op::merge(s0, sm[tid + s * kstep], p);
          sm[tid] = s0;
        }
        __syncthreads();
      }
    }
    if (kl == 0 && b < p.B) {
      if (p.final) {
        const std::int64_t yo = a * p.B + b;
        if constexpr (Op::kIndex) {
          static_cast<std::int64_t*>(p.y)[yo] = s0.i;
        } else {
          Acc v = s0.v;
          if constexpr (std::is_floating_point_v<Acc>) {
            if (p.divide) v = v / static_cast<Acc>(p.count);
          }
          store_as(p.ydt, p.y, yo, v);
        }
      } else {
        const std::int64_t wo = (a * p.S + split) * p.B + b;
        store_as(p.ydt, p.y, wo, s0.v);
        if constexpr (Op::kIndex) p.yi[wo] = s0.i;
      }
    }
  }
}

template <typename Op, typename In, typename Acc>
void launch(const RedParams& p, const RedLaunch& l, const char* name) {
  use_device(l.device);
  reduce_kernel<Op, In, Acc><<<l.blocks, l.threads, 0, as_stream(l.stream)>>>(p);
  PGK_CHECK_LAUNCH(name);
}

}  // namespace red
}  // namespace pgk
