// The op-name dispatch of the unary family (plain C++; the kernels live in the .cu files).
#include "unary/unary.h"

#include "pygpukit_native/errors.h"

namespace pgk {

void unary(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (unary_sign(a, op, in, out) || unary_math(a, op, in, out)) return;
  fail("unary", "unknown op '" + op + "'");
}

}  // namespace pgk
