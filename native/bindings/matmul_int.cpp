// Bindings of the matmul_int family: keyword arguments straight into MatmulIntArgs; the GIL is
// released for the launch. pygpukit/backends/native_kernels/matmul_int.py calls this.
#include "matmul_int/matmul_int.h"

#include <cstdint>
#include <string>

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(matmul_int) {
  m.def(
      "matmul_int",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::int64_t batch,
         std::int64_t m, std::int64_t n, std::int64_t k, std::uintptr_t a,
         std::int64_t a_batch_stride, std::int64_t sam, std::int64_t sak, std::uintptr_t b,
         std::int64_t b_batch_stride, std::int64_t sbk, std::int64_t sbn, std::uintptr_t d) {
        pgk::MatmulIntArgs x{};
        x.device = device;
        x.stream = stream;
        x.dtype = pgk::dtype_from_name(dtype);
        x.batch = batch;
        x.m = m;
        x.n = n;
        x.k = k;
        x.a = a;
        x.a_batch_stride = a_batch_stride;
        x.sam = sam;
        x.sak = sak;
        x.b = b;
        x.b_batch_stride = b_batch_stride;
        x.sbk = sbk;
        x.sbn = sbn;
        x.d = d;
        pgk::matmul_int(x);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("batch"), py::arg("m"),
      py::arg("n"), py::arg("k"), py::arg("a"), py::arg("a_batch_stride"), py::arg("sam"),
      py::arg("sak"), py::arg("b"), py::arg("b_batch_stride"), py::arg("sbk"), py::arg("sbn"),
      py::arg("d"), PGK_NOGIL,
      "d[z] = a[z] @ b[z] over integers with wraparound in the dtype (NumPy's matmul)");
}
