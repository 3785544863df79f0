// Every storage dtype as a C++ type, and conversions between any two of them with the values the
// NumPy backend gives (NumPy + ml_dtypes astype on x86-64), which is also what the Triton twins
// compute (pygpukit/triton_kernels/copy.py, `convert`):
// - float -> float8: round to nearest even with saturation, then the ml_dtypes overflow rule:
//   e4m3fn has no inf, |x| > 464 (the midpoint above 448) gives NaN; e5m2 gives inf for
//   |x| >= 61440 (the midpoint above 57344 rounds to even = inf). Sign kept.
// - float64 -> bfloat16/float8 round through float32 (two roundings, as ml_dtypes);
//   float64 -> float16 rounds once (NumPy). Integers -> float16/bfloat16/float8 go through
//   float32 (exact below 2**24, as the reference).
// - float -> integer: x86's cvtt, which NumPy uses: through int64 for int64, else through int32
//   (NaN and out-of-range give INT_MIN) keeping the low bits for narrower types (200.0 -> int8
//   gives -56). CUDA's own conversion saturates instead.
// - -> bool: x != 0 (NaN -> true); integer -> integer: truncation / sign extension (wraps).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/errors.h"

namespace pgk {

// bool as stored (one byte); a struct so that it is a type of its own, not uint8.
struct Bool {
  std::uint8_t v;
};
using E4M3 = __nv_fp8_e4m3;
using E5M2 = __nv_fp8_e5m2;
using BF16 = __nv_bfloat16;

// Call f(T{}) with T the storage type of dt (all twelve dtypes).
template <typename F>
void dispatch_any(DType dt, const char* who, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(BF16{});
    case DType::f64: return f(double{});
    case DType::i64: return f(std::int64_t{});
    case DType::i32: return f(std::int32_t{});
    case DType::i16: return f(std::int16_t{});
    case DType::i8: return f(std::int8_t{});
    case DType::u8: return f(std::uint8_t{});
    case DType::boolean: return f(Bool{});
    case DType::e4m3: return f(E4M3{});
    case DType::e5m2: return f(E5M2{});
  }
  fail(who, "unknown dtype");
}

template <typename T>
inline constexpr bool is_fp8_v = std::is_same_v<T, E4M3> || std::is_same_v<T, E5M2>;
template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, BF16>;
// Floating storage types (half types and fp8 compute in float, float64 in double).
template <typename T>
inline constexpr bool is_floating_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || is_half_v<T> || is_fp8_v<T>;
// Numeric storage types (arithmetic is defined on them; fp8 is a storage format only), the same
// with Bool, and the floating ones: the ok() predicates of the map-engine and reduce functors.
template <typename T>
inline constexpr bool kNumeric =
    (is_floating_v<T> && !is_fp8_v<T>) || (std::is_integral_v<T> && !std::is_same_v<T, bool>);
template <typename T>
inline constexpr bool kNumericOrBool = kNumeric<T> || std::is_same_v<T, Bool>;
template <typename T>
inline constexpr bool kFloat = kNumeric<T> && is_floating_v<T>;

// The type arithmetic on T runs in (pygpukit/backends/cpu/_common.py compute_dtype; bool
// arithmetic runs in int32 and is turned back into bool by != 0).
template <typename T>
struct ComputeOf {
  using type = std::conditional_t<is_floating_v<T>, float, T>;
};
template <>
struct ComputeOf<double> {
  using type = double;
};
template <>
struct ComputeOf<Bool> {
  using type = std::int32_t;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

namespace cvt {

__device__ __forceinline__ float f32_of(float x) { return x; }
__device__ __forceinline__ float f32_of(__half x) { return __half2float(x); }
__device__ __forceinline__ float f32_of(BF16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float f32_of(E4M3 x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32_of(E5M2 x) { return static_cast<float>(x); }

__device__ __forceinline__ E4M3 e4m3_of(float x) {
  E4M3 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  if (fabsf(x) > 464.0f) r.__x = signbit(x) ? 0xFF : 0x7F;  // NaN
  return r;
}

__device__ __forceinline__ E5M2 e5m2_of(float x) {
  E5M2 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  if (fabsf(x) >= 61440.0f) r.__x = signbit(x) ? 0xFC : 0x7C;  // +-inf
  return r;
}

// x86 cvtt semantics (see the file comment); X is float or double, compared in its own type.
template <typename I, typename X>
__device__ __forceinline__ I int_of_float(X x) {
  if constexpr (sizeof(I) == 8) {
    const bool ok = x >= X(-9223372036854775808.0) && x < X(9223372036854775808.0);
    return ok ? static_cast<I>(static_cast<long long>(x)) : static_cast<I>(LLONG_MIN);
  } else {
    const bool ok = x >= X(-2147483648.0) && x < X(2147483648.0);
    const int t = ok ? static_cast<int>(x) : INT_MIN;
    return static_cast<I>(static_cast<unsigned int>(t));  // keeps the low bits
  }
}

// Conversion into D from the three canonical sources: float, double, a 64-bit integer.
template <typename D, typename Enable = void>
struct To;

template <>
struct To<float> {
  __device__ static float f32(float x) { return x; }
  __device__ static float f64(double x) { return __double2float_rn(x); }
  __device__ static float i64(long long v) { return __ll2float_rn(v); }
};
template <>
struct To<double> {
  __device__ static double f32(float x) { return static_cast<double>(x); }
  __device__ static double f64(double x) { return x; }
  __device__ static double i64(long long v) { return __ll2double_rn(v); }
};
template <>
struct To<__half> {
  __device__ static __half f32(float x) { return __float2half_rn(x); }
  __device__ static __half f64(double x) { return __double2half(x); }  // one rounding
  __device__ static __half i64(long long v) { return __float2half_rn(__ll2float_rn(v)); }
};
template <>
struct To<BF16> {
  __device__ static BF16 f32(float x) { return __float2bfloat16_rn(x); }
  __device__ static BF16 f64(double x) { return __float2bfloat16_rn(__double2float_rn(x)); }
  __device__ static BF16 i64(long long v) { return __float2bfloat16_rn(__ll2float_rn(v)); }
};
template <>
struct To<E4M3> {
  __device__ static E4M3 f32(float x) { return e4m3_of(x); }
  __device__ static E4M3 f64(double x) { return e4m3_of(__double2float_rn(x)); }
  __device__ static E4M3 i64(long long v) { return e4m3_of(__ll2float_rn(v)); }
};
template <>
struct To<E5M2> {
  __device__ static E5M2 f32(float x) { return e5m2_of(x); }
  __device__ static E5M2 f64(double x) { return e5m2_of(__double2float_rn(x)); }
  __device__ static E5M2 i64(long long v) { return e5m2_of(__ll2float_rn(v)); }
};
template <>
struct To<Bool> {
  __device__ static Bool f32(float x) { return Bool{static_cast<std::uint8_t>(x != 0.0f)}; }
  __device__ static Bool f64(double x) { return Bool{static_cast<std::uint8_t>(x != 0.0)}; }
  __device__ static Bool i64(long long v) { return Bool{static_cast<std::uint8_t>(v != 0)}; }
};
template <typename I>
struct To<I, std::enable_if_t<std::is_integral_v<I>>> {
  __device__ static I f32(float x) { return int_of_float<I>(x); }
  __device__ static I f64(double x) { return int_of_float<I>(x); }
  __device__ static I i64(long long v) {
    using U = std::make_unsigned_t<I>;
    return static_cast<I>(static_cast<U>(static_cast<unsigned long long>(v)));  // wraps
  }
};

}  // namespace cvt

// s converted to D exactly as the NumPy backend's astype (identity when the types agree).
template <typename D, typename S>
__device__ __forceinline__ D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<S, double>) {
    return cvt::To<D>::f64(s);
  } else if constexpr (is_floating_v<S>) {
    return cvt::To<D>::f32(cvt::f32_of(s));
  } else if constexpr (std::is_same_v<S, Bool>) {
    return cvt::To<D>::i64(s.v != 0 ? 1 : 0);
  } else {
    static_assert(std::is_integral_v<S>, "convert: unknown source type");
    return cvt::To<D>::i64(static_cast<long long>(s));
  }
}

// Wrapping integer arithmetic without signed-overflow UB: compute in the unsigned type (at
// least 32 bits, as C++ promotes narrower ones anyway), then truncate back.
template <typename T>
using wrap_uint_t = std::conditional_t<(sizeof(T) < 4), unsigned int, std::make_unsigned_t<T>>;

template <typename T>
__device__ __forceinline__ T wrap_add(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
__device__ __forceinline__ T wrap_sub(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
__device__ __forceinline__ T wrap_mul(T a, T b) {
  using U = wrap_uint_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

// Store a compute value into an output of run-time dtype (reductions write one value per
// output, so the switch costs nothing measurable there).
template <typename V>
__device__ __forceinline__ void store_as(DType dt, void* base, std::int64_t i, V v) {
  switch (dt) {
    case DType::f32: static_cast<float*>(base)[i] = convert<float>(v); break;
    case DType::f16: static_cast<__half*>(base)[i] = convert<__half>(v); break;
    case DType::bf16: static_cast<BF16*>(base)[i] = convert<BF16>(v); break;
    case DType::f64: static_cast<double*>(base)[i] = convert<double>(v); break;
    case DType::i64: static_cast<std::int64_t*>(base)[i] = convert<std::int64_t>(v); break;
    case DType::i32: static_cast<std::int32_t*>(base)[i] = convert<std::int32_t>(v); break;
    case DType::i16: static_cast<std::int16_t*>(base)[i] = convert<std::int16_t>(v); break;
    case DType::i8: static_cast<std::int8_t*>(base)[i] = convert<std::int8_t>(v); break;
    case DType::u8: static_cast<std::uint8_t*>(base)[i] = convert<std::uint8_t>(v); break;
    case DType::boolean: static_cast<Bool*>(base)[i] = convert<Bool>(v); break;
    case DType::e4m3: static_cast<E4M3*>(base)[i] = convert<E4M3>(v); break;
    case DType::e5m2: static_cast<E5M2*>(base)[i] = convert<E5M2>(v); break;
  }
}

}  // namespace pgk
