// Bindings of the softmax family: keyword arguments straight into SoftmaxArgs /
// SoftmaxColsArgs; the GIL is released for the launch. pygpukit/backends/native_kernels/
// softmax.py calls these.
#include "softmax/softmax.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(softmax) {
  m.def(
      "softmax",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::int64_t rows,
         std::int64_t n, std::uintptr_t x, std::int64_t x_row_stride, std::uintptr_t y,
         std::int64_t y_row_stride, double scale, bool causal, std::int64_t sq) {
        pgk::SoftmaxArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.rows = rows;
        a.n = n;
        a.x = x;
        a.x_row_stride = x_row_stride;
        a.y = y;
        a.y_row_stride = y_row_stride;
        a.scale = scale;
        a.causal = causal;
        a.sq = sq;
        pgk::softmax(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("rows"), py::arg("n"),
      py::arg("x"), py::arg("x_row_stride"), py::arg("y"), py::arg("y_row_stride"),
      py::arg("scale"), py::arg("causal"), py::arg("sq"), PGK_NOGIL,
      "y = softmax(scale * x) over rows of n; causal: row i sees columns j <= i % sq + n - sq");
  m.def(
      "softmax_cols",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::int64_t outer,
         std::int64_t n, std::int64_t inner, std::uintptr_t x, std::uintptr_t y, double scale) {
        pgk::SoftmaxColsArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.outer = outer;
        a.n = n;
        a.inner = inner;
        a.x = x;
        a.y = y;
        a.scale = scale;
        pgk::softmax_cols(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("outer"), py::arg("n"),
      py::arg("inner"), py::arg("x"), py::arg("y"), py::arg("scale"), PGK_NOGIL,
      "y = softmax(scale * x) along n of contiguous [outer, n, inner] arrays");
}
