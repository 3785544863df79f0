// exp, log, sqrt, rsqrt, sin, cos, tanh on float dtypes (integer inputs are cast to float32 on
// the Python side first, as the Triton twin converts them).
#include "unary/ops.cuh"
#include "unary/unary.h"

namespace pgk {
namespace {

#define PGK_UNARY_MATH(Name, f32_expr, f64_expr)         \
  struct Name {                                          \
    template <typename T>                                \
    static constexpr bool ok() { return kFloat<T>; } \
    template <typename C>                                \
    __device__ C operator()(C x, C, C) const {           \
      if constexpr (std::is_same_v<C, float>) {          \
        return f32_expr;                                 \
      } else {                                           \
        return f64_expr;                                 \
      }                                                  \
    }                                                    \
  };
PGK_UNARY_MATH(Exp, expf(x), exp(x))
PGK_UNARY_MATH(Log, logf(x), log(x))
PGK_UNARY_MATH(Sqrt, __fsqrt_rn(x), __dsqrt_rn(x))
PGK_UNARY_MATH(Rsqrt, __fdiv_rn(1.0f, __fsqrt_rn(x)), __ddiv_rn(1.0, __dsqrt_rn(x)))
PGK_UNARY_MATH(Sin, sinf(x), sin(x))
PGK_UNARY_MATH(Cos, cosf(x), cos(x))
PGK_UNARY_MATH(Tanh, tanhf(x), tanh(x))
#undef PGK_UNARY_MATH

}  // namespace

bool unary_math(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "exp") {
    un::run<Exp>(a, in, out, "exp");
  } else if (op == "log") {
    un::run<Log>(a, in, out, "log");
  } else if (op == "sqrt") {
    un::run<Sqrt>(a, in, out, "sqrt");
  } else if (op == "rsqrt") {
    un::run<Rsqrt>(a, in, out, "rsqrt");
  } else if (op == "sin") {
    un::run<Sin>(a, in, out, "sin");
  } else if (op == "cos") {
    un::run<Cos>(a, in, out, "cos");
  } else if (op == "tanh") {
    un::run<Tanh>(a, in, out, "tanh");
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
