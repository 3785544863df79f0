// Activation kernels on the row-map engine (include/pygpukit_native/rowmap.cuh): one launch,
// each element read once and written once, computed in float (double for float64) and rounded
// once at the store. The formulas are the Triton module's, written out in the same order:
// - sigmoid(x) = 1/(1+e) for x >= 0, else e/(1+e), e = exp(-|x|): exp never overflows.
// - silu(x) = x * sigmoid(x); relu(x) = x < 0 ? 0 : x (NaN stays NaN; integers stay integers).
// - softplus(x) = max(x, 0) + log1p(exp(-|x|)): no overflow, log1p keeps the small term exact.
// - gelu "none": 0.5 x erfc(-x/sqrt 2), erfc by the Numerical Recipes erfcc fit in float32
//   (fractional error < 1.2e-7, as the reference) and CUDA's erfc in float64;
//   gelu "tanh": x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) (0.5 (1 + tanh u) =
//   sigmoid(2u), free of the cancellation of 1 + tanh u for x << 0).
// - silu_mul(gate, up) = silu(gate) * up, gelu_mul likewise: fused, one rounding.
// expf/exp/erfc/log1pf are the accurate (non -use_fast_math) library functions.
#include "activation/activation.h"

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/rowmap.cuh"
#include "pygpukit_native/sigmoid.cuh"

namespace pgk {
namespace {

__device__ __forceinline__ float lg1p(float v) { return log1pf(v); }
__device__ __forceinline__ double lg1p(double v) { return log1p(v); }

// Numerical Recipes erfcc (2nd ed., 6.2), Horner from t^9 down, in float32 as the reference.
__device__ __forceinline__ float erfc_c(float z) {
  const float az = fabsf(z);
  const float t = 1.0f / (1.0f + 0.5f * az);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float ans = t * expf(-az * az + p);
  return z >= 0.0f ? ans : 2.0f - ans;
}
__device__ __forceinline__ double erfc_c(double z) { return erfc(z); }

template <typename C>
__device__ __forceinline__ C gelu_none(C x) {
  return C(0.5) * x * erfc_c(-x * C(0.7071067811865476));
}

template <typename C>
__device__ __forceinline__ C gelu_tanh(C x) {
  const C u = C(0.7978845608028654) * (x + C(0.044715) * x * x * x);
  return x * sigmoid_c(C(2) * u);
}

struct Sigmoid {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return sigmoid_c(x);
  }
};
struct Relu {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return x < C(0) ? C(0) : x;  // a NaN compares false and passes through
  }
};
struct Silu {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return x * sigmoid_c(x);
  }
};
struct Softplus {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return (x > C(0) ? x : C(0)) + lg1p(sig_exp(-fabs(x)));  // NaN: the sum is NaN
  }
};
struct GeluNone {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return gelu_none(x);
  }
};
struct GeluTanh {
  static constexpr int kArity = 1;
  template <typename C>
  __device__ static C apply(C x, C) {
    return gelu_tanh(x);
  }
};
struct SiluMul {
  static constexpr int kArity = 2;
  template <typename C>
  __device__ static C apply(C g, C u) {
    return g * sigmoid_c(g) * u;
  }
};
struct GeluMulNone {
  static constexpr int kArity = 2;
  template <typename C>
  __device__ static C apply(C g, C u) {
    return gelu_none(g) * u;
  }
};
struct GeluMulTanh {
  static constexpr int kArity = 2;
  template <typename C>
  __device__ static C apply(C g, C u) {
    return gelu_tanh(g) * u;
  }
};

template <class F>
void run_float(const ActivationArgs& a, const RowMap& m, const char* name) {
  dispatch_float(a.dtype, name, [&](auto t) {
    using T = decltype(t);
    using C = typename Compute<T>::type;
    launch_rowmap<F, C, T, T, T>(m, as_stream(a.stream), name);
  });
}

template <typename T>
void relu_int(const RowMap& m, cudaStream_t s) {
  launch_rowmap<Relu, T, T, T, T>(m, s, "relu");
}

void run_relu(const ActivationArgs& a, const RowMap& m) {
  const cudaStream_t s = as_stream(a.stream);
  switch (a.dtype) {
    case DType::i64:
      return relu_int<std::int64_t>(m, s);
    case DType::i32:
      return relu_int<std::int32_t>(m, s);
    case DType::i16:
      return relu_int<std::int16_t>(m, s);
    case DType::i8:
      return relu_int<std::int8_t>(m, s);
    case DType::u8:
      return relu_int<std::uint8_t>(m, s);
    default:
      return run_float<Relu>(a, m, "relu");
  }
}

}  // namespace

void activation(const std::string& op, const ActivationArgs& a) {
  const bool gated = op == "silu_mul" || op == "gelu_mul_none" || op == "gelu_mul_tanh";
  RowMap m{a.rows, a.n, a.x, a.x_row_stride, a.up, a.up_row_stride, a.y, a.y_row_stride};
  if (!gated) {
    m.b = 0;
    m.sb = 0;
  }
  PGK_REQUIRE(a.rows >= 0 && a.n >= 0, "rows and n must be >= 0");
  if (a.rows == 0 || a.n == 0) return;
  check_rowmap(m, gated, "activation");
  use_device(a.device);
  if (op == "sigmoid") return run_float<Sigmoid>(a, m, "sigmoid");
  if (op == "relu") return run_relu(a, m);
  if (op == "silu") return run_float<Silu>(a, m, "silu");
  if (op == "softplus") return run_float<Softplus>(a, m, "softplus");
  if (op == "gelu_none") return run_float<GeluNone>(a, m, "gelu");
  if (op == "gelu_tanh") return run_float<GeluTanh>(a, m, "gelu");
  if (op == "silu_mul") return run_float<SiluMul>(a, m, "silu_mul");
  if (op == "gelu_mul_none") return run_float<GeluMulNone>(a, m, "gelu_mul");
  if (op == "gelu_mul_tanh") return run_float<GeluMulTanh>(a, m, "gelu_mul");
  fail("activation", "unknown op '" + op + "'");
}

}  // namespace pgk
