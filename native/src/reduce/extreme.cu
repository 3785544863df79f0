// max, min and argmax, compared in the input's compute type (exact).
#include "reduce/kernel.cuh"

namespace pgk {

bool reduce_extreme(const std::string& op, DType in, const RedParams& p, const RedLaunch& l) {
  const bool arg = op == "argmax";
  if (!arg && op != "max" && op != "min") return false;
  dispatch_any(in, op.c_str(), [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    if constexpr (!kNumericOrBool<T>) {
      fail("reduce", std::string(dtype_name(in)) + " is a storage type; cast it first");
    } else if (arg) {
      red::launch<red::ArgMaxOp<C>, T, C>(p, l, "reduce_argmax");
    } else {
      red::launch<red::ExtremeOp<C>, T, C>(p, l, "reduce_extreme");
    }
  });
  return true;
}

}  // namespace pgk
