// Bindings of the unary family; pygpukit/backends/native_kernels/unary.py calls this.
#include "unary/unary.h"

#include "pygpukit_native/map_binding.h"

PGK_FAMILY(unary) {
  pgk::def_map(m, "unary", &pgk::unary,
               "out = op(x) elementwise over collapsed strided dims: neg, abs, exp, log, sqrt, "
               "rsqrt, sin, cos, tanh");
}
