// Bindings of the reduce family; pygpukit/backends/native_kernels/reduce.py plans the [A, K, B]
// view, the thread layout and the split of K, and calls this once or twice per reduction.
#include "reduce/reduce.h"

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(reduce) {
  m.def(
      "reduce",
      [](int device, std::uintptr_t stream, const std::string& op, const std::string& in_dtype,
         const std::string& out_dtype, std::int64_t A, std::int64_t K, std::int64_t B,
         std::int64_t sa, std::int64_t sk, std::int64_t sb, std::uintptr_t x, std::uintptr_t xi,
         std::uintptr_t y, std::uintptr_t yi, int kt, int bt, bool kfast, std::int64_t splits,
         std::int64_t k_chunk, double count, bool final) {
        pgk::ReduceArgs r{device, stream, pgk::dtype_from_name(in_dtype),
                          pgk::dtype_from_name(out_dtype), A, K, B, sa, sk, sb, x, xi, y, yi,
                          kt, bt, kfast, splits, k_chunk, count, final};
        pgk::reduce(op, r);
      },
      py::arg("device"), py::arg("stream"), py::arg("op"), py::arg("in_dtype"),
      py::arg("out_dtype"), py::arg("A"), py::arg("K"), py::arg("B"), py::arg("sa"),
      py::arg("sk"), py::arg("sb"), py::arg("x"), py::arg("xi"), py::arg("y"), py::arg("yi"),
      py::arg("kt"), py::arg("bt"), py::arg("kfast"), py::arg("splits"), py::arg("k_chunk"),
      py::arg("count"), py::arg("final"), PGK_NOGIL,
      "sum/mean/max/min/argmax of x viewed as [A, K, B] over K, into y (final: [A, B]; "
      "else partials [A, splits, B])");
}
