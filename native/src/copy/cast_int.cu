// cast from int64, int32, int16, int8, uint8 to every dtype.
#include "copy/cast.cuh"
#include "copy/copy.h"

namespace pgk {

bool cast_from_int(const MapArgs& a, DType in, DType out) {
  switch (in) {
    case DType::i64: cp::cast_to<std::int64_t>(a, out); return true;
    case DType::i32: cp::cast_to<std::int32_t>(a, out); return true;
    case DType::i16: cp::cast_to<std::int16_t>(a, out); return true;
    case DType::i8: cp::cast_to<std::int8_t>(a, out); return true;
    case DType::u8: cp::cast_to<std::uint8_t>(a, out); return true;
    default: return false;
  }
}

}  // namespace pgk
