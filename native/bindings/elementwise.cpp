// Bindings of the elementwise family (binary arithmetic, comparisons, where, clamp);
// pygpukit/backends/native_kernels/elementwise.py prepares the operands and calls this.
#include "elementwise/elementwise.h"

#include "pygpukit_native/map_binding.h"

PGK_FAMILY(elementwise) {
  pgk::def_map(m, "elementwise", &pgk::elementwise,
               "out = op(x0, x1[, x2]) elementwise over collapsed strided dims: add, sub, mul, "
               "div, maximum, minimum, pow, eq, ne, lt, le, gt, ge, where, clamp");
}
