// Bindings of the mixed_gemm family (CUTLASS's mixed-input GEMM with int4 weights): keyword
// arguments straight into MixedGemmArgs; the GIL is released for the launch.
// pygpukit/backends/native/mixed_gemm.py validates, allocates the scratch and calls this.
#include "mixed_gemm/mixed_gemm.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(mixed_gemm) {
  m.def(
      "mixed_gemm_int4_workspace",
      [](int device, const std::string& dtype, const std::string& scale_dtype, std::int64_t m,
         std::int64_t n, std::int64_t k, std::int64_t group) {
        return pgk::mixed_gemm_int4_workspace(device, pgk::dtype_from_name(dtype),
                                              pgk::dtype_from_name(scale_dtype), m, n, k, group);
      },
      py::arg("device"), py::arg("dtype"), py::arg("scale_dtype"), py::arg("m"), py::arg("n"),
      py::arg("k"), py::arg("group"), PGK_NOGIL,
      "bytes of scratch mixed_gemm_int4 needs for these sizes (mixed_gemm.h)");
  m.def(
      "mixed_gemm_int4",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::uintptr_t x,
         std::int64_t m, std::int64_t k, std::int64_t x_row_stride, std::uintptr_t data,
         std::int64_t n, std::uintptr_t scales, const std::string& scale_dtype,
         std::int64_t group, std::uintptr_t bias, std::uintptr_t y, std::uintptr_t workspace,
         std::size_t workspace_bytes) {
        pgk::MixedGemmArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.x = x;
        a.m = m;
        a.k = k;
        a.x_row_stride = x_row_stride;
        a.data = data;
        a.n = n;
        a.scales = scales;
        a.scale_dtype = pgk::dtype_from_name(scale_dtype);
        a.group = group;
        a.bias = bias;
        a.y = y;
        a.workspace = workspace;
        a.workspace_bytes = workspace_bytes;
        pgk::mixed_gemm_int4(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("x"), py::arg("m"),
      py::arg("k"), py::arg("x_row_stride"), py::arg("data"), py::arg("n"), py::arg("scales"),
      py::arg("scale_dtype"), py::arg("group"), py::arg("bias"), py::arg("y"),
      py::arg("workspace"), py::arg("workspace_bytes"), PGK_NOGIL,
      "y = x @ (data * scales)^T (+ bias) for int4 data [n, k] with 128-groups (mixed_gemm.h)");
}
