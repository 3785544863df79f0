// Bindings of the embedding family (embedding, bias_add): keyword arguments straight into the
// args structs; the GIL is released for the launch. pygpukit/backends/native_kernels/
// embedding.py calls these.
#include "embedding/embedding.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(embedding) {
  m.def(
      "embedding",
      [](int device, std::uintptr_t stream, const std::string& ids_dtype, int elem_bytes,
         std::int64_t n_ids, std::uintptr_t ids, std::int64_t ids_stride, std::uintptr_t table,
         std::int64_t num_rows, std::int64_t dim, std::int64_t table_row_stride,
         std::int64_t table_col_stride, std::uintptr_t y, std::int64_t y_row_stride,
         std::uint64_t fill) {
        pgk::EmbeddingArgs a{};
        a.device = device;
        a.stream = stream;
        a.ids_dtype = pgk::dtype_from_name(ids_dtype);
        a.elem_bytes = elem_bytes;
        a.n_ids = n_ids;
        a.ids = ids;
        a.ids_stride = ids_stride;
        a.table = table;
        a.num_rows = num_rows;
        a.dim = dim;
        a.table_row_stride = table_row_stride;
        a.table_col_stride = table_col_stride;
        a.y = y;
        a.y_row_stride = y_row_stride;
        a.fill = fill;
        pgk::embedding(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("ids_dtype"), py::arg("elem_bytes"),
      py::arg("n_ids"), py::arg("ids"), py::arg("ids_stride"), py::arg("table"),
      py::arg("num_rows"), py::arg("dim"), py::arg("table_row_stride"),
      py::arg("table_col_stride"), py::arg("y"), py::arg("y_row_stride"), py::arg("fill"),
      PGK_NOGIL, "y[i] = table[ids[i]] (rows of `fill` bits for ids out of range)");
  m.def(
      "bias_add",
      [](int device, std::uintptr_t stream, const std::string& dtype,
         const std::string& bias_dtype, std::int64_t rows, std::int64_t n, std::uintptr_t x,
         std::int64_t x_row_stride, std::uintptr_t bias, std::uintptr_t y,
         std::int64_t y_row_stride) {
        pgk::BiasAddArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.bias_dtype = pgk::dtype_from_name(bias_dtype);
        a.rows = rows;
        a.n = n;
        a.x = x;
        a.x_row_stride = x_row_stride;
        a.bias = bias;
        a.y = y;
        a.y_row_stride = y_row_stride;
        pgk::bias_add(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("bias_dtype"),
      py::arg("rows"), py::arg("n"), py::arg("x"), py::arg("x_row_stride"), py::arg("bias"),
      py::arg("y"), py::arg("y_row_stride"), PGK_NOGIL,
      "y = x + bias over rows of n (bias contiguous, x's dtype or its compute type)");
}
