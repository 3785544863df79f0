#include "pygpukit_native/dtype.h"

#include "pygpukit_native/errors.h"

namespace pgk {

namespace {
struct Entry {
  const char* name;
  DType dt;
  int bytes;
};
constexpr Entry kTypes[] = {
    {"float32", DType::f32, 4},   {"float16", DType::f16, 2},       {"bfloat16", DType::bf16, 2},
    {"float64", DType::f64, 8},   {"int64", DType::i64, 8},         {"int32", DType::i32, 4},
    {"int16", DType::i16, 2},     {"int8", DType::i8, 1},           {"uint8", DType::u8, 1},
    {"bool", DType::boolean, 1},  {"float8_e4m3fn", DType::e4m3, 1}, {"float8_e5m2", DType::e5m2, 1},
};
}  // namespace

DType dtype_from_name(const std::string& name) {
  for (const auto& e : kTypes) {
    if (name == e.name) return e.dt;
  }
  fail("dtype_from_name", "unknown dtype '" + name + "'");
}

const char* dtype_name(DType dt) {
  for (const auto& e : kTypes) {
    if (e.dt == dt) return e.name;
  }
  return "?";
}

int dtype_bytes(DType dt) {
  for (const auto& e : kTypes) {
    if (e.dt == dt) return e.bytes;
  }
  return 0;
}

}  // namespace pgk
