// cast from bool, float8_e4m3fn, float8_e5m2 to every dtype.
#include "copy/cast.cuh"
#include "copy/copy.h"

namespace pgk {

bool cast_from_other(const MapArgs& a, DType in, DType out) {
  switch (in) {
    case DType::boolean: cp::cast_to<Bool>(a, out); return true;
    case DType::e4m3: cp::cast_to<E4M3>(a, out); return true;
    case DType::e5m2: cp::cast_to<E5M2>(a, out); return true;
    default: return false;
  }
}

}  // namespace pgk
