// _pygpukit_native: the module object. Families add themselves (registry.h); this file only
// creates the module, the CudaError exception, and the build facts pygpukit reports in `info`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "pygpukit_native/errors.h"
#include "pygpukit_native/registry.h"

namespace py = pybind11;

namespace pgk {
std::vector<std::pair<std::string, Registrar>>& registry() {
  static std::vector<std::pair<std::string, Registrar>> families;
  return families;
}
}  // namespace pgk

PYBIND11_MODULE(_pygpukit_native, m) {
  m.doc() = "pygpukit's native CUDA kernels; called through pygpukit.backends.native";
  // A subclass of pygpukit's CudaError, so `except pygpukit.CudaError` catches native failures.
  py::object base = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  try {
    base = py::module_::import("pygpukit._core").attr("CudaError");
  } catch (py::error_already_set&) {
    // imported on its own, without pygpukit: a plain RuntimeError subclass
  }
  py::register_exception<pgk::CudaError>(m, "CudaError", base.ptr());
  m.attr("__version__") = PGK_VERSION;
  m.attr("cuda_archs") = PGK_CUDA_ARCHS;
  auto& fams = pgk::registry();
  std::sort(fams.begin(), fams.end());
  std::vector<std::string> names;
  for (auto& [name, reg] : fams) {
    reg(m);
    names.push_back(name);
  }
  m.attr("families") = names;
}
