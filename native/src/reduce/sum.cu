// sum and mean: float inputs accumulate in their compute type (float32, float64 for float64);
// integer and bool inputs in int64 for sums, float64 for means.
#include "reduce/kernel.cuh"

namespace pgk {

bool reduce_sum(const std::string& op, DType in, const RedParams& p, const RedLaunch& l) {
  const bool mean = op == "mean";
  if (!mean && op != "sum") return false;
  dispatch_any(in, op.c_str(), [&](auto t) {
    using T = decltype(t);
    if constexpr (!kNumericOrBool<T>) {
      fail("reduce", std::string(dtype_name(in)) + " is a storage type; cast it first");
    } else if constexpr (is_floating_v<T>) {
      red::launch<red::SumOp<compute_t<T>>, T, compute_t<T>>(p, l, "reduce_sum");
    } else if (mean) {
      red::launch<red::SumOp<double>, T, double>(p, l, "reduce_mean");
    } else {
      red::launch<red::SumOp<std::int64_t>, T, std::int64_t>(p, l, "reduce_sum");
    }
  });
  return true;
}

}  // namespace pgk
