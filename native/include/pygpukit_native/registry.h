// Families register their bindings at static-initialisation time, so adding a family is adding
// bindings/<family>.cpp (CMake globs it) without editing module.cpp:
//
//   PGK_FAMILY(norm) { m.def("rmsnorm", ..., py::call_guard<py::gil_scoped_release>()); }
//
// Every function that launches or waits releases the GIL (docs/design.md) through that call guard.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace pgk {

using Registrar = void (*)(pybind11::module_&);

std::vector<std::pair<std::string, Registrar>>& registry();

struct Register {
  Register(const char* family, Registrar f) { registry().emplace_back(family, f); }
};

}  // namespace pgk

#define PGK_FAMILY(name)                                                      \
  static void pgk_register_##name(pybind11::module_& m);                      \
  static const ::pgk::Register pgk_register_obj_##name(#name, &pgk_register_##name); \
  static void pgk_register_##name(pybind11::module_& m)

// The call guard every launching binding uses.
#define PGK_NOGIL pybind11::call_guard<pybind11::gil_scoped_release>()
