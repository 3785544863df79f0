// Bindings of the gemv family: keyword arguments straight into GemvArgs; the GIL is released for
// the launch. pygpukit/backends/native/gemv.py validates and calls this.
#include "gemv/gemv.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(gemv) {
  m.def(
      "gemv",
      [](int device, std::uintptr_t stream, const std::string& format, const std::string& dtype,
         const std::string& sdtype, std::int64_t m, std::int64_t n, std::int64_t k,
         std::uintptr_t x, std::int64_t x_row_stride, std::uintptr_t w, std::int64_t w_row_bytes,
         std::uintptr_t scales, std::int64_t s_row_stride, std::int64_t block,
         double global_scale, std::uintptr_t bias, std::uintptr_t y, bool pdl, bool prefetch,
         bool gated, bool norm, std::uintptr_t norm_w, std::uintptr_t residual, std::uintptr_t h,
         double eps) {
        pgk::GemvArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.sdtype = pgk::dtype_from_name(sdtype);
        a.m = m;
        a.n = n;
        a.k = k;
        a.x = x;
        a.x_row_stride = x_row_stride;
        a.w = w;
        a.w_row_bytes = w_row_bytes;
        a.scales = scales;
        a.s_row_stride = s_row_stride;
        a.block = block;
        a.global_scale = static_cast<float>(global_scale);
        a.bias = bias;
        a.y = y;
        a.pdl = pdl;
        a.prefetch = prefetch;
        a.gated = gated;
        a.norm = norm;
        a.norm_w = norm_w;
        a.residual = residual;
        a.h = h;
        a.eps = static_cast<float>(eps);
        pgk::gemv(a, format.c_str());
      },
      py::arg("device"), py::arg("stream"), py::arg("format"), py::arg("dtype"),
      py::arg("sdtype"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("x"),
      py::arg("x_row_stride"), py::arg("w"), py::arg("w_row_bytes"), py::arg("scales"),
      py::arg("s_row_stride"), py::arg("block"), py::arg("global_scale"), py::arg("bias"),
      py::arg("y"), py::arg("pdl") = false, py::arg("prefetch") = false,
      py::arg("gated") = false, py::arg("norm") = false, py::arg("norm_w") = 0,
      py::arg("residual") = 0, py::arg("h") = 0, py::arg("eps") = 0.0, PGK_NOGIL,
      "y[m, n] = x[m, k] @ dequant(w)^T (+ bias) for format dense/fp8/int4/nvfp4 (gemv.h); "
      "pdl: programmatic dependent launch (sm_90+), prefetch: W read before its wait; gated: "
      "w holds n = 2I rows (gate, then up), y[m, I] = silu(x @ wg^T) * (x @ wu^T), no bias "
      "(fp8, int4, nvfp4); norm: one row, y = rmsnorm(x (+ residual), norm_w, eps) @ "
      "dequant(w)^T (+ bias), h = x + residual stored (fp8, int4, nvfp4)");
}
