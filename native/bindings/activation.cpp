// Bindings of the activation family: keyword arguments straight into ActivationArgs; the GIL is
// released for the launch. pygpukit/backends/native_kernels/activation.py calls these.
#include "activation/activation.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(activation) {
  m.def(
      "activation",
      [](const std::string& op, int device, std::uintptr_t stream, const std::string& dtype,
         std::int64_t rows, std::int64_t n, std::uintptr_t x, std::int64_t x_row_stride,
         std::uintptr_t up, std::int64_t up_row_stride, std::uintptr_t y,
         std::int64_t y_row_stride) {
        pgk::ActivationArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.rows = rows;
        a.n = n;
        a.x = x;
        a.x_row_stride = x_row_stride;
        a.up = up;
        a.up_row_stride = up_row_stride;
        a.y = y;
        a.y_row_stride = y_row_stride;
        pgk::activation(op, a);
      },
      py::arg("op"), py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("rows"),
      py::arg("n"), py::arg("x"), py::arg("x_row_stride"), py::arg("up"),
      py::arg("up_row_stride"), py::arg("y"), py::arg("y_row_stride"), PGK_NOGIL,
      "y = op(x) (or op(gate=x, up)) over rows of n elements; op is sigmoid, relu, silu, softplus, "
      "gelu_none, gelu_tanh, silu_mul, gelu_mul_none or gelu_mul_tanh");
}
