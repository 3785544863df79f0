// where (raw bits of the result dtype, selected by a bool condition) and clamp.
#include "elementwise/elementwise.h"
#include "elementwise/launch.cuh"
#include "elementwise/ops.cuh"

namespace pgk {

bool select(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "where") {
    if (in != out) ew::unsupported("where", in, out);
    switch (dtype_bytes(out)) {
      case 1: launch_map<ew::Where, std::uint8_t, Bool, std::uint8_t, std::uint8_t>(a, {}, "where"); break;
      case 2: launch_map<ew::Where, std::uint16_t, Bool, std::uint16_t, std::uint16_t>(a, {}, "where"); break;
      case 4: launch_map<ew::Where, std::uint32_t, Bool, std::uint32_t, std::uint32_t>(a, {}, "where"); break;
      case 8: launch_map<ew::Where, std::uint64_t, Bool, std::uint64_t, std::uint64_t>(a, {}, "where"); break;
      default: ew::unsupported("where", in, out);
    }
  } else if (op == "clamp") {
    ew::same_or_f32<ew::Clamp>(a, in, out, "clamp", ew::Clamp{a.flags & 3});
  } else {
    return false;
  }
  return true;
}

}  // namespace pgk
