// Bindings of the moe family (the CUTLASS grouped expert product): keyword arguments straight
// into MoeGroupedArgs; the GIL is released for the launch. pygpukit/backends/native/moe.py
// validates, allocates the scratch and calls this.
#include "moe/moe.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(moe) {
  m.def(
      "moe_grouped_workspace",
      [](int device, const std::string& dtype, std::int64_t experts, std::int64_t n,
         std::int64_t k, std::int64_t slots, bool gated, std::int64_t block_m) {
        return pgk::moe_grouped_workspace(device, pgk::dtype_from_name(dtype), experts, n, k,
                                          slots, gated, block_m);
      },
      py::arg("device"), py::arg("dtype"), py::arg("experts"), py::arg("n"), py::arg("k"),
      py::arg("slots"), py::arg("gated"), py::arg("block_m"), PGK_NOGIL,
      "bytes of scratch moe_grouped needs for these sizes (moe.h)");
  m.def(
      "moe_grouped",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::uintptr_t x,
         std::int64_t x_rows, std::int64_t x_row_stride, std::int64_t top_k, std::uintptr_t w,
         std::uintptr_t w_up, std::int64_t experts, std::int64_t n, std::int64_t k,
         std::uintptr_t rows, std::uintptr_t block_expert, std::int64_t nb, std::int64_t block_m,
         std::uintptr_t row_scale, std::uintptr_t y, std::uintptr_t workspace,
         std::size_t workspace_bytes) {
        pgk::MoeGroupedArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.x = x;
        a.x_rows = x_rows;
        a.x_row_stride = x_row_stride;
        a.top_k = top_k;
        a.w = w;
        a.w_up = w_up;
        a.experts = experts;
        a.n = n;
        a.k = k;
        a.rows = rows;
        a.block_expert = block_expert;
        a.nb = nb;
        a.block_m = block_m;
        a.row_scale = row_scale;
        a.y = y;
        a.workspace = workspace;
        a.workspace_bytes = workspace_bytes;
        pgk::moe_grouped(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("x"), py::arg("x_rows"),
      py::arg("x_row_stride"), py::arg("top_k"), py::arg("w"), py::arg("w_up"),
      py::arg("experts"), py::arg("n"), py::arg("k"), py::arg("rows"), py::arg("block_expert"),
      py::arg("nb"), py::arg("block_m"), py::arg("row_scale"), py::arg("y"),
      py::arg("workspace"), py::arg("workspace_bytes"), PGK_NOGIL,
      "y[rows[s]] = (silu(xg w^T) * (xg w_up^T) | xg w^T) * row_scale on moe_align's layout "
      "(moe.h)");
}
