// Bindings of the attention family (sdpa, sdpa_varlen): keyword arguments straight into
// AttnArgs; the GIL is released for the launch. pygpukit/backends/native_kernels/attention.py
// validates and calls this.
#include "attention/attention.h"

#include <pybind11/stl.h>

#include <array>
#include <string>

#include "pygpukit_native/errors.h"
#include "pygpukit_native/registry.h"

namespace py = pybind11;

namespace {

using Strides = std::array<std::int64_t, 4>;

void copy4(std::int64_t* dst, const Strides& s) {
  for (int i = 0; i < 4; ++i) dst[i] = s[i];
}

}  // namespace

PGK_FAMILY(attention) {
  m.def(
      "sdpa",
      [](int device, std::uintptr_t stream, const std::string& dtype, const std::string& mode,
         std::int64_t units, std::int64_t heads, std::int64_t kv_heads, std::int64_t sq,
         std::int64_t sk, std::int64_t d, std::int64_t dv, std::uintptr_t q, std::uintptr_t k,
         std::uintptr_t v, std::uintptr_t out, const Strides& sq_s, const Strides& sk_s,
         const Strides& sv_s, const Strides& so_s, std::uintptr_t cu_q, std::int64_t cu_q_stride,
         std::uintptr_t cu_k, std::int64_t cu_k_stride, double scale, bool causal) {
        pgk::AttnArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        if (mode == "dense") {
          a.mode = pgk::AttnMode::dense;
        } else if (mode == "varlen") {
          a.mode = pgk::AttnMode::varlen;
        } else {
          pgk::fail("sdpa", "mode must be 'dense' or 'varlen', got '" + mode + "'");
        }
        a.units = units;
        a.heads = heads;
        a.kv_heads = kv_heads;
        a.sq = sq;
        a.sk = sk;
        a.d = d;
        a.dv = dv;
        a.q = q;
        a.k = k;
        a.v = v;
        a.out = out;
        copy4(a.sq_s, sq_s);
        copy4(a.sk_s, sk_s);
        copy4(a.sv_s, sv_s);
        copy4(a.so_s, so_s);
        a.cu_q = cu_q;
        a.cu_q_stride = cu_q_stride;
        a.cu_k = cu_k;
        a.cu_k_stride = cu_k_stride;
        a.scale = scale;
        a.causal = causal;
        pgk::attention_rows(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("mode"), py::arg("units"),
      py::arg("heads"), py::arg("kv_heads"), py::arg("sq"), py::arg("sk"), py::arg("d"),
      py::arg("dv"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("sq_s"),
      py::arg("sk_s"), py::arg("sv_s"), py::arg("so_s"), py::arg("cu_q"), py::arg("cu_q_stride"),
      py::arg("cu_k"), py::arg("cu_k_stride"), py::arg("scale"), py::arg("causal"), PGK_NOGIL,
      "out = softmax(scale * q k^T + causal mask) v, one warp per query row; strides are "
      "(unit, head, position, dim) in elements; mode 'varlen' offsets positions by cu_seqlens");
}
