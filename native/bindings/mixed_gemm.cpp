// Bindings of the mixed_gemm family (CUTLASS's mixed-input GEMM with int4 or fp8 weights rounded
// to x's dtype): keyword arguments straight into MixedGemmArgs; the GIL is released for the
// launch. pygpukit/backends/native/mixed_gemm.py validates, allocates the scratch and calls this.
#include "mixed_gemm/mixed_gemm.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(mixed_gemm) {
  m.def(
      "mixed_gemm_workspace",
      [](int device, const std::string& format, const std::string& dtype,
         const std::string& scale_dtype, std::int64_t m, std::int64_t n, std::int64_t k,
         std::int64_t block) {
        return pgk::mixed_gemm_workspace(device, pgk::mixed_format_from_name(format),
                                         pgk::dtype_from_name(dtype),
                                         pgk::dtype_from_name(scale_dtype), m, n, k, block);
      },
      py::arg("device"), py::arg("format"), py::arg("dtype"), py::arg("scale_dtype"),
      py::arg("m"), py::arg("n"), py::arg("k"), py::arg("block"), PGK_NOGIL,
      "bytes of scratch mixed_gemm needs for these sizes (mixed_gemm.h)");
  m.def(
      "mixed_gemm",
      [](int device, std::uintptr_t stream, const std::string& format, const std::string& dtype,
         std::uintptr_t x, std::int64_t m, std::int64_t k, std::int64_t x_row_stride,
         std::uintptr_t data, std::int64_t n, std::uintptr_t scales,
         const std::string& scale_dtype, std::int64_t block, std::uintptr_t bias,
         std::uintptr_t y, std::uintptr_t workspace, std::size_t workspace_bytes) {
        pgk::MixedGemmArgs a{};
        a.device = device;
        a.stream = stream;
        a.format = pgk::mixed_format_from_name(format);
        a.dtype = pgk::dtype_from_name(dtype);
        a.x = x;
        a.m = m;
        a.k = k;
        a.x_row_stride = x_row_stride;
        a.data = data;
        a.n = n;
        a.scales = scales;
        a.scale_dtype = pgk::dtype_from_name(scale_dtype);
        a.block = block;
        a.bias = bias;
        a.y = y;
        a.workspace = workspace;
        a.workspace_bytes = workspace_bytes;
        pgk::mixed_gemm(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("format"), py::arg("dtype"), py::arg("x"),
      py::arg("m"), py::arg("k"), py::arg("x_row_stride"), py::arg("data"), py::arg("n"),
      py::arg("scales"), py::arg("scale_dtype"), py::arg("block"), py::arg("bias"), py::arg("y"),
      py::arg("workspace"), py::arg("workspace_bytes"), PGK_NOGIL,
      "y = x @ round_x(data * scales)^T (+ bias) for int4 or fp8 e4m3 data [n, k] (mixed_gemm.h)");
}
