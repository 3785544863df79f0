// Bindings of the rope family: keyword arguments straight into RopeArgs; the GIL is released
// for the launch. pygpukit/backends/native_kernels/rope.py calls this.
#include "rope/rope.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(rope) {
  m.def(
      "rope",
      [](int device, std::uintptr_t stream, const std::string& dtype,
         const std::string& table_dtype, const std::string& pos_dtype, std::int64_t tokens,
         std::int64_t s, std::int64_t heads, std::int64_t d, std::int64_t half, std::uintptr_t x,
         std::int64_t sxb, std::int64_t sxs, std::int64_t sxh, std::uintptr_t y,
         std::int64_t syb, std::int64_t sys, std::int64_t syh, std::uintptr_t pos,
         std::int64_t spb, std::int64_t sps, std::uintptr_t cos, std::uintptr_t sin,
         std::int64_t max_pos, std::int64_t scr, std::int64_t scc, std::int64_t ssr,
         std::int64_t ssc, bool gptj, bool copy_tail) {
        pgk::RopeArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.table_dtype = pgk::dtype_from_name(table_dtype);
        a.pos_dtype = pgk::dtype_from_name(pos_dtype);
        a.tokens = tokens;
        a.s = s;
        a.heads = heads;
        a.d = d;
        a.half = half;
        a.x = x;
        a.sxb = sxb;
        a.sxs = sxs;
        a.sxh = sxh;
        a.y = y;
        a.syb = syb;
        a.sys = sys;
        a.syh = syh;
        a.pos = pos;
        a.spb = spb;
        a.sps = sps;
        a.cos = cos;
        a.sin = sin;
        a.max_pos = max_pos;
        a.scr = scr;
        a.scc = scc;
        a.ssr = ssr;
        a.ssc = ssc;
        a.gptj = gptj;
        a.copy_tail = copy_tail;
        pgk::rope(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("table_dtype"),
      py::arg("pos_dtype"), py::arg("tokens"), py::arg("s"), py::arg("heads"), py::arg("d"),
      py::arg("half"), py::arg("x"), py::arg("sxb"), py::arg("sxs"), py::arg("sxh"),
      py::arg("y"), py::arg("syb"), py::arg("sys"), py::arg("syh"), py::arg("pos"),
      py::arg("spb"), py::arg("sps"), py::arg("cos"), py::arg("sin"), py::arg("max_pos"),
      py::arg("scr"), py::arg("scc"), py::arg("ssr"), py::arg("ssc"), py::arg("gptj"),
      py::arg("copy_tail"), PGK_NOGIL,
      "y = x with pairs (neox: i, i+half; gptj: 2i, 2i+1) rotated by the table rows at the "
      "positions; x, y [..., S, H, D] addressed as (b, s, h) with element strides");
}
