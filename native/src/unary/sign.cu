// neg and abs: any numeric dtype; integers wrap in two's complement (abs(INT_MIN) = INT_MIN,
// as NumPy); abs of a float clears the sign bit (abs(-0.0) = +0.0, NaN stays NaN).
#include "unary/ops.cuh"
#include "unary/unary.h"

namespace pgk {
namespace {

struct Neg {
  template <typename T>
  static constexpr bool ok() { return kNumeric<T>; }
  template <typename C>
  __device__ C operator()(C x, C, C) const {
    if constexpr (std::is_integral_v<C>) {
      return wrap_sub(C(0), x);
    } else {
      return -x;
    }
  }
};

struct Abs {
  template <typename T>
  static constexpr bool ok() { return kNumeric<T>; }
  template <typename C>
  __device__ C operator()(C x, C, C) const {
    if constexpr (std::is_same_v<C, float>) {
      return fabsf(x);
    } else if constexpr (std::is_same_v<C, double>) {
      return fabs(x);
    } else if constexpr (std::is_signed_v<C>) {
      return x < 0 ? wrap_sub(C(0), x) : x;
    } else {
      return x;
    }
  }
};

}  // namespace

bool unary_sign(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "neg") {
    un::run<Neg>(a, in, out, "neg");
  } else if (op == "abs") {
    un::run<Abs>(a, in, out, "abs");
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
