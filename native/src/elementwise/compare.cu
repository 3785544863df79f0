// eq, ne, lt, le, gt, ge: inputs of one numeric or bool dtype, compared in its compute type.
#include "elementwise/elementwise.h"
#include "elementwise/launch.cuh"
#include "elementwise/ops.cuh"

namespace pgk {
namespace {

template <typename Op>
void run(const MapArgs& a, DType in, DType out, const char* name) {
  if (out != DType::boolean) ew::unsupported(name, in, out);
  dispatch_any(in, name, [&](auto t) {
    using T = decltype(t);
    if constexpr (Op::template ok<T>()) {
      launch_map<Op, compute_t<T>, T, T, Bool>(a, Op{}, name);
    } else {
      ew::unsupported(name, in, out);
    }
  });
}

}  // namespace

bool compare(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "eq") {
    run<ew::Eq>(a, in, out, "eq");
  } else if (op == "ne") {
    run<ew::Ne>(a, in, out, "ne");
  } else if (op == "lt") {
    run<ew::Lt>(a, in, out, "lt");
  } else if (op == "le") {
    run<ew::Le>(a, in, out, "le");
  } else if (op == "gt") {
    run<ew::Gt>(a, in, out, "gt");
  } else if (op == "ge") {
    run<ew::Ge>(a, in, out, "ge");
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
