// The op-name dispatch of the elementwise family (plain C++; the kernels live in the .cu files).
#include "elementwise/elementwise.h"

#include "pygpukit_native/errors.h"

namespace pgk {

void elementwise(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (arith(a, op, in, out) || compare(a, op, in, out) || select(a, op, in, out)) return;
  fail("elementwise", "unknown op '" + op + "'");
}

}  // namespace pgk
