// add, sub, mul, div, maximum, minimum, pow (see elementwise.h for the dtype combinations).
#include "elementwise/elementwise.h"
#include "elementwise/launch.cuh"
#include "elementwise/ops.cuh"

namespace pgk {

bool arith(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "add") {
    ew::same_or_f32<ew::Add>(a, in, out, "add");
  } else if (op == "sub") {
    ew::same_or_f32<ew::Sub>(a, in, out, "sub");
  } else if (op == "mul") {
    ew::same_or_f32<ew::Mul>(a, in, out, "mul");
  } else if (op == "div") {
    ew::same_or_f32<ew::Div>(a, in, out, "div");
  } else if (op == "maximum") {
    ew::same_or_f32<ew::Maximum>(a, in, out, "maximum");
  } else if (op == "minimum") {
    ew::same_or_f32<ew::Minimum>(a, in, out, "minimum");
  } else if (op == "pow") {
    ew::same_or_f32<ew::Pow>(a, in, out, "pow");
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
