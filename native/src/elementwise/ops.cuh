// The math of the elementwise family as functors for the map engine: each takes its operands in
// the compute type C (float for half types, double for float64, the integer type itself, int32
// for bool) and returns the value to store (converted to the output type by the engine).
#pragma once

#include <cstdint>
#include <type_traits>

#include "pygpukit_native/numeric.cuh"

namespace pgk {
namespace ew {

// max/min propagating NaN (torch.maximum / np.maximum); fmax's +0 > -0 as Triton's max.NaN.
template <typename C>
__device__ __forceinline__ C max_nan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a || b != b) return a + b;
    return std::is_same_v<C, float> ? fmaxf(a, b) : fmax(a, b);
  } else {
    return a > b ? a : b;
  }
}

template <typename C>
__device__ __forceinline__ C min_nan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a || b != b) return a + b;
    return std::is_same_v<C, float> ? fminf(a, b) : fmin(a, b);
  } else {
    return a < b ? a : b;
  }
}

// Integer power by squaring in C's width (wraps like NumPy). A negative exponent cannot raise
// on the device: torch's values (1 for base 1, +-1 for base -1, else 0), as the Triton twin.
template <typename C>
__device__ __forceinline__ C ipow(C x, C e) {
  if constexpr (std::is_signed_v<C>) {
    if (e < 0) return x == C(1) ? C(1) : (x == C(-1) ? ((e & 1) ? C(-1) : C(1)) : C(0));
  }
  C r = 1;
  C base = x;
  while (e != 0) {
    if (e & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    e = static_cast<C>(e >> 1);
  }
  return r;
}

struct Add {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    if constexpr (std::is_integral_v<C>) {
      return wrap_add(a, b);
    } else {
      return a + b;
    }
  }
};

struct Sub {
  template <typename T>
  static constexpr bool ok() { return kNumeric<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    if constexpr (std::is_integral_v<C>) {
      return wrap_sub(a, b);
    } else {
      return a - b;
    }
  }
};

struct Mul {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    if constexpr (std::is_integral_v<C>) {
      return wrap_mul(a, b);
    } else {
      return a * b;
    }
  }
};

struct Div {  // true division, correctly rounded (float results only)
  template <typename T>
  static constexpr bool ok() { return kFloat<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    if constexpr (std::is_same_v<C, float>) {
      return __fdiv_rn(a, b);
    } else {
      return __ddiv_rn(a, b);
    }
  }
};

struct Maximum {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    return max_nan(a, b);
  }
};

struct Minimum {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    return min_nan(a, b);
  }
};

struct Pow {  // CUDA's pow (the libdevice function Triton calls) for floats
  template <typename T>
  static constexpr bool ok() { return kNumeric<T>; }
  template <typename C>
  __device__ C operator()(C a, C b, C) const {
    if constexpr (std::is_same_v<C, float>) {
      return powf(a, b);
    } else if constexpr (std::is_same_v<C, double>) {
      return pow(a, b);
    } else {
      return ipow(a, b);
    }
  }
};

// Comparisons in the compute type (widening half types to float preserves order; NaN compares
// unequal to everything). Three kernels serve the six ops: ne is eq negated (exact with NaN:
// NaN != x is true), gt and ge are lt and le with the operands swapped (compare.cu).
struct EqNe {
  bool ne;
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ bool operator()(C a, C b, C) const {
    return (a == b) != ne;
  }
};
struct Lt {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ bool operator()(C a, C b, C) const {
    return a < b;
  }
};
struct Le {
  template <typename T>
  static constexpr bool ok() { return kNumericOrBool<T>; }
  template <typename C>
  __device__ bool operator()(C a, C b, C) const {
    return a <= b;
  }
};

// cond ? a : b on raw bits (a and b already hold the result dtype's values).
struct Where {
  template <typename C>
  __device__ C operator()(C c, C a, C b) const {
    return c != 0 ? a : b;
  }
};

// min(max(x, lo), hi) with either bound optional (flags), NaN-propagating (torch.clamp).
struct Clamp {
  int has;
  template <typename T>
  static constexpr bool ok() { return kNumeric<T>; }
  template <typename C>
  __device__ C operator()(C x, C lo, C hi) const {
    if (has & 1) x = max_nan(x, lo);
    if (has & 2) x = min_nan(x, hi);
    return x;
  }
};

}  // namespace ew
}  // namespace pgk
