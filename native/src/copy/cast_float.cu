// cast from float32, float16, bfloat16, float64 to every dtype.
#include "copy/cast.cuh"
#include "copy/copy.h"

namespace pgk {

bool cast_from_float(const MapArgs& a, DType in, DType out) {
  switch (in) {
    case DType::f32: cp::cast_to<float>(a, out); return true;
    case DType::f16: cp::cast_to<__half>(a, out); return true;
    case DType::bf16: cp::cast_to<BF16>(a, out); return true;
    case DType::f64: cp::cast_to<double>(a, out); return true;
    default: return false;
  }
}

}  // namespace pgk
