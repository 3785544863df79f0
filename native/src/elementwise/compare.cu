// eq, ne, lt, le, gt, ge: inputs of one numeric or bool dtype, compared in its compute type.
#include <utility>

#include "elementwise/elementwise.h"
#include "elementwise/launch.cuh"
#include "elementwise/ops.cuh"

namespace pgk {
namespace {

template <typename Op>
void run(const MapArgs& a, DType in, DType out, const char* name, Op op = Op{}) {
  if (out != DType::boolean) ew::unsupported(name, in, out);
  dispatch_any(in, name, [&](auto t) {
    using T = decltype(t);
    if constexpr (Op::template ok<T>()) {
      launch_map<Op, compute_t<T>, T, T, Bool>(a, op, name);
    } else {
      ew::unsupported(name, in, out);
    }
  });
}

// a > b is b < a: the same kernel with inputs 1 and 2 exchanged.
MapArgs swapped(const MapArgs& a) {
  MapArgs b = a;
  std::swap(b.ptr[1], b.ptr[2]);
  std::swap(b.scalar[1], b.scalar[2]);
  std::swap(b.stride[1], b.stride[2]);
  return b;
}

}  // namespace

bool compare(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "eq") {
    run(a, in, out, "eq", ew::EqNe{false});
  } else if (op == "ne") {
    run(a, in, out, "ne", ew::EqNe{true});
  } else if (op == "lt") {
    run<ew::Lt>(a, in, out, "lt");
  } else if (op == "le") {
    run<ew::Le>(a, in, out, "le");
  } else if (op == "gt") {
    run<ew::Lt>(swapped(a), in, out, "gt");
  } else if (op == "ge") {
    run<ew::Le>(swapped(a), in, out, "ge");
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
