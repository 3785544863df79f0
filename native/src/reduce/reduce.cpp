// Argument checks and launch shape of the reduce family (plain C++; kernels in the .cu files).
#include "reduce/reduce.h"

#include <algorithm>

#include "pygpukit_native/errors.h"

namespace pgk {
namespace {

bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

void reduce(const std::string& op, const ReduceArgs& r) {
  const char* who = "reduce";
  if (r.A < 1 || r.B < 1 || r.K < 0) fail(who, "A and B must be >= 1 and K >= 0");
  if (!pow2(r.kt) || !pow2(r.bt) || r.kt * r.bt > 256)
    fail(who, "kt and bt must be powers of two with kt * bt <= 256");
  if (r.splits < 1 || r.k_chunk < 1) fail(who, "splits and k_chunk must be >= 1");
  if (r.splits > 1 && r.k_chunk * (r.splits - 1) >= std::max<std::int64_t>(r.K, 1))
    fail(who, "every split must hold part of K");
  // An empty reduced axis (K == 0) reads nothing: x may be the null pointer of an empty array.
  if (!r.y || (!r.x && r.K > 0)) fail(who, "x and y must be device pointers");
  if (op == "argmax" && !r.final && !r.yi) fail(who, "argmax partials need yi");
  RedParams p{};
  p.x = reinterpret_cast<const void*>(r.x);
  p.xi = reinterpret_cast<const std::int64_t*>(r.xi);
  p.y = reinterpret_cast<void*>(r.y);
  p.yi = reinterpret_cast<std::int64_t*>(r.yi);
  p.ydt = r.out;
  p.A = r.A;
  p.K = r.K;
  p.B = r.B;
  p.sa = r.sa;
  p.sk = r.sk;
  p.sb = r.sb;
  p.S = r.splits;
  p.k_chunk = r.k_chunk;
  p.n_bt = (r.B + r.bt - 1) / r.bt;
  p.tiles = r.A * p.n_bt * r.splits;
  p.kt = r.kt;
  p.bt = r.bt;
  p.kfast = r.kfast ? 1 : 0;
  p.final = r.final ? 1 : 0;
  p.divide = (op == "mean" && r.final) ? 1 : 0;
  p.is_min = op == "min" ? 1 : 0;
  p.count = r.count;
  RedLaunch l{r.device, r.stream,
              static_cast<unsigned>(std::min<std::int64_t>(p.tiles, 1 << 20)),
              static_cast<unsigned>(r.kt * r.bt)};
  if (reduce_sum(op, r.in, p, l) || reduce_extreme(op, r.in, p, l)) return;
  fail(who, "unknown op '" + op + "'");
}

}  // namespace pgk
