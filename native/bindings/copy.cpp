// Bindings of the copy family (strided copy, dtype cast); pygpukit/backends/native_kernels/copy.py
// calls this, and through the routed copy op so do contiguous() and setitem on the GPU.
#include "copy/copy.h"

#include "pygpukit_native/map_binding.h"

PGK_FAMILY(copy) {
  pgk::def_map(m, "copy", &pgk::copy,
               "out = x (op 'copy', bit-exact) or out = cast(x) (op 'cast', NumPy/ml_dtypes "
               "values) over collapsed strided dims");
}
