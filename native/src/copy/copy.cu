// copy: raw bits by element width (bool and fp8 move as bytes; NaN payloads kept).
#include "copy/cast.cuh"
#include "copy/copy.h"

namespace pgk {

void copy(const MapArgs& a, const std::string& op, DType in, DType out) {
  if (op == "cast") {
    if (cast_from_float(a, in, out) || cast_from_int(a, in, out) || cast_from_other(a, in, out))
      return;
    fail("cast", std::string("unknown source dtype ") + dtype_name(in));
  }
  if (op != "copy") fail("copy", "unknown op '" + op + "'");
  if (in != out) fail("copy", "copy needs equal dtypes (use cast)");
  switch (dtype_bytes(out)) {
    case 1: launch_map<cp::Identity, std::uint8_t, std::uint8_t, std::uint8_t, std::uint8_t>(a, {}, "copy"); break;
    case 2: launch_map<cp::Identity, std::uint16_t, std::uint16_t, std::uint16_t, std::uint16_t>(a, {}, "copy"); break;
    case 4: launch_map<cp::Identity, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>(a, {}, "copy"); break;
    case 8: launch_map<cp::Identity, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>(a, {}, "copy"); break;
    default: fail("copy", "unsupported element size");
  }
}

}  // namespace pgk
