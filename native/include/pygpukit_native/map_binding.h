// One Python signature for every family built on the map engine (elementwise, unary, copy):
//
//   fn(device, stream, op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fscalars, iscalars)
//
// sizes: the collapsed dims, outermost first; ptrs/strides/fscalars/iscalars: one entry per
// operand (out and three inputs; pointer 0 = scalar or absent input). Arguments are converted
// and checked with the GIL held, the launch runs without it.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pygpukit_native/dtype.h"
#include "pygpukit_native/map_args.h"
#include "pygpukit_native/registry.h"

namespace pgk {

using MapEntry = void (*)(const MapArgs&, const std::string& op, DType in, DType out);

inline void def_map(pybind11::module_& m, const char* name, MapEntry fn, const char* doc) {
  namespace py = pybind11;
  m.def(
      name,
      [fn](int device, std::uintptr_t stream, const std::string& op, const std::string& in_dtype,
           const std::string& out_dtype, int flags, const std::vector<std::int64_t>& sizes,
           const std::vector<std::uintptr_t>& ptrs,
           const std::vector<std::vector<std::int64_t>>& strides, const std::vector<double>& fs,
           const std::vector<std::int64_t>& is) {
        const MapArgs a = make_map_args(device, stream, sizes, ptrs, strides, fs, is, flags);
        fn(a, op, dtype_from_name(in_dtype), dtype_from_name(out_dtype));
      },
      py::arg("device"), py::arg("stream"), py::arg("op"), py::arg("in_dtype"),
      py::arg("out_dtype"), py::arg("flags"), py::arg("sizes"), py::arg("ptrs"),
      py::arg("strides"), py::arg("fscalars"), py::arg("iscalars"), PGK_NOGIL, doc);
}

}  // namespace pgk
