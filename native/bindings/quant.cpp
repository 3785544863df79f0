// Bindings of the quant family: keyword arguments straight into QuantizeArgs / DequantizeArgs;
// the GIL is released for the launch. pygpukit/backends/native_kernels/quant.py calls these.
#include "quant/quant.h"

#include <cstdint>
#include <string>

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(quant) {
  m.def(
      "quantize_fp8",
      [](int device, std::uintptr_t stream, const std::string& src, const std::string& dst,
         std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
         std::uintptr_t x, std::uintptr_t q, std::uintptr_t scale, std::int64_t gr,
         std::int64_t gc, std::uintptr_t partial, std::int64_t n_partial) {
        pgk::QuantizeArgs a{};
        a.device = device;
        a.stream = stream;
        a.src = pgk::dtype_from_name(src);
        a.dst = pgk::dtype_from_name(dst);
        a.rows = rows;
        a.cols = cols;
        a.sr = sr;
        a.sc = sc;
        a.x = x;
        a.q = q;
        a.scale = scale;
        a.gr = gr;
        a.gc = gc;
        a.partial = partial;
        a.n_partial = n_partial;
        pgk::quantize_fp8(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("src"), py::arg("dst"), py::arg("rows"),
      py::arg("cols"), py::arg("sr"), py::arg("sc"), py::arg("x"), py::arg("q"),
      py::arg("scale"), py::arg("gr"), py::arg("gc"), py::arg("partial"), py::arg("n_partial"),
      PGK_NOGIL,
      "q, scale of x's [rows, cols] view: one fp32 amax / fp8_max scale per (gr, gc) group");
  m.def(
      "dequantize_fp8",
      [](int device, std::uintptr_t stream, const std::string& src, const std::string& dst,
         std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
         std::uintptr_t q, std::uintptr_t scale, std::int64_t ssr, std::int64_t ssc,
         std::int64_t gr, std::int64_t gc, std::uintptr_t y) {
        pgk::DequantizeArgs a{};
        a.device = device;
        a.stream = stream;
        a.src = pgk::dtype_from_name(src);
        a.dst = pgk::dtype_from_name(dst);
        a.rows = rows;
        a.cols = cols;
        a.sr = sr;
        a.sc = sc;
        a.q = q;
        a.scale = scale;
        a.ssr = ssr;
        a.ssc = ssc;
        a.gr = gr;
        a.gc = gc;
        a.y = y;
        pgk::dequantize_fp8(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("src"), py::arg("dst"), py::arg("rows"),
      py::arg("cols"), py::arg("sr"), py::arg("sc"), py::arg("q"), py::arg("scale"),
      py::arg("ssr"), py::arg("ssc"), py::arg("gr"), py::arg("gc"), py::arg("y"), PGK_NOGIL,
      "y = q * scale (float32 product, one rounding) over q's [rows, cols] view");
}
