// Bindings of the norm family: keyword arguments straight into RowNormArgs; the GIL is released
// for the launch. pygpukit/backends/native_kernels/norm.py validates and calls these.
#include "norm/norm.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

namespace {

pgk::RowNormArgs row_args(int device, std::uintptr_t stream, const std::string& dtype,
                          const std::string& wdtype, std::int64_t rows, std::int64_t n,
                          std::uintptr_t x, std::int64_t x_row_stride, std::uintptr_t y,
                          double eps) {
  pgk::RowNormArgs a{};
  a.device = device;
  a.stream = stream;
  a.dtype = pgk::dtype_from_name(dtype);
  a.wdtype = pgk::dtype_from_name(wdtype);
  a.rows = rows;
  a.n = n;
  a.x = x;
  a.x_row_stride = x_row_stride;
  a.y = y;
  a.eps = eps;
  return a;
}

}  // namespace

PGK_FAMILY(norm) {
  m.def(
      "rmsnorm",
      [](int device, std::uintptr_t stream, const std::string& dtype, const std::string& wdtype,
         std::int64_t rows, std::int64_t n, std::uintptr_t x, std::int64_t x_row_stride,
         std::uintptr_t weight, std::int64_t w_stride, std::uintptr_t residual,
         std::int64_t res_row_stride, std::uintptr_t y, std::uintptr_t h, double eps) {
        auto a = row_args(device, stream, dtype, wdtype, rows, n, x, x_row_stride, y, eps);
        a.weight = weight;
        a.w_stride = w_stride;
        a.residual = residual;
        a.res_row_stride = res_row_stride;
        a.h = h;
        pgk::rmsnorm(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("wdtype"), py::arg("rows"),
      py::arg("n"), py::arg("x"), py::arg("x_row_stride"), py::arg("weight"),
      py::arg("w_stride"), py::arg("residual"), py::arg("res_row_stride"), py::arg("y"),
      py::arg("h"), py::arg("eps"), PGK_NOGIL,
      "y = x / sqrt(mean(x^2) + eps) * weight over rows; with residual, h = x + residual first");
  m.def(
      "layernorm",
      [](int device, std::uintptr_t stream, const std::string& dtype, const std::string& wdtype,
         std::int64_t rows, std::int64_t n, std::uintptr_t x, std::int64_t x_row_stride,
         std::uintptr_t weight, std::int64_t w_stride, std::uintptr_t bias,
         std::int64_t b_stride, std::uintptr_t y, double eps) {
        auto a = row_args(device, stream, dtype, wdtype, rows, n, x, x_row_stride, y, eps);
        a.weight = weight;
        a.w_stride = w_stride;
        a.bias = bias;
        a.b_stride = b_stride;
        pgk::layernorm(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("wdtype"), py::arg("rows"),
      py::arg("n"), py::arg("x"), py::arg("x_row_stride"), py::arg("weight"),
      py::arg("w_stride"), py::arg("bias"), py::arg("b_stride"), py::arg("y"), py::arg("eps"),
      PGK_NOGIL, "y = (x - mean) / sqrt(var + eps) * weight + bias over rows");
}
