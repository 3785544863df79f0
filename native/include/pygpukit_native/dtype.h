// Element types crossing the binding boundary, named as pygpukit names them (pure C++: the
// bindings include it too).
#pragma once

#include <string>

namespace pgk {

enum class DType { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean, e4m3, e5m2 };

DType dtype_from_name(const std::string& name);  // std::invalid_argument for unknown names
const char* dtype_name(DType dt);
int dtype_bytes(DType dt);

}  // namespace pgk
