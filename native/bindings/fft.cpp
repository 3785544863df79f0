// Bindings of the fft family: keyword arguments straight into FftArgs; the GIL is released for
// the launch. pygpukit/backends/native/fft.py calls this.
#include "fft/fft.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "pygpukit_native/registry.h"

namespace py = pybind11;

PGK_FAMILY(fft) {
  m.def(
      "fft_rows",
      [](int device, std::uintptr_t stream, int log2n, bool inverse, bool f64, int load,
         const std::string& x_dtype, std::uintptr_t x, std::int64_t rows, std::int64_t d1,
         std::int64_t d2, std::int64_t sx0, std::int64_t sx1, std::int64_t sx2,
         std::int64_t sxe, std::int64_t n_in, std::uintptr_t win, std::int64_t hop,
         std::int64_t pad, std::int64_t sig_len, int pad_mode, std::uintptr_t y,
         std::int64_t sy0, std::int64_t sy1, std::int64_t sy2, std::int64_t sye,
         std::int64_t n_out, int store, double scale, std::uintptr_t twiddles,
         const std::vector<int>& radices, int points, bool bluestein) {
        pgk::FftArgs a{};
        if (radices.size() > std::size_t(pgk::kMaxPasses)) {
          throw py::value_error("fft_rows: at most " + std::to_string(pgk::kMaxPasses) +
                                " radices, got " + std::to_string(radices.size()));
        }
        a.npass = int(radices.size());
        std::int64_t product = 1;  // checked against the radices by fft_rows
        for (std::size_t i = 0; i < radices.size(); ++i) {
          a.radix[i] = radices[i];
          product =
              product > 0 && radices[i] >= 1 && product <= (1 << 20) ? product * radices[i] : -1;
        }
        a.points = points ? points : int(product);
        a.bluestein = bluestein;
        a.device = device;
        a.stream = stream;
        a.log2n = log2n;
        a.inverse = inverse;
        a.f64 = f64;
        a.load = load;
        a.x_dtype = pgk::dtype_from_name(x_dtype);
        a.x = x;
        a.rows = rows;
        a.d1 = d1;
        a.d2 = d2;
        a.sx0 = sx0;
        a.sx1 = sx1;
        a.sx2 = sx2;
        a.sxe = sxe;
        a.n_in = n_in;
        a.win = win;
        a.hop = hop;
        a.pad = pad;
        a.sig_len = sig_len;
        a.pad_mode = pad_mode;
        a.y = y;
        a.sy0 = sy0;
        a.sy1 = sy1;
        a.sy2 = sy2;
        a.sye = sye;
        a.n_out = n_out;
        a.store = store;
        a.scale = scale;
        a.twiddles = twiddles;
        pgk::fft_rows(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("log2n"), py::arg("inverse"), py::arg("f64"),
      py::arg("load"), py::arg("x_dtype"), py::arg("x"), py::arg("rows"), py::arg("d1"),
      py::arg("d2"), py::arg("sx0"), py::arg("sx1"), py::arg("sx2"), py::arg("sxe"),
      py::arg("n_in"), py::arg("win"), py::arg("hop"), py::arg("pad"), py::arg("sig_len"),
      py::arg("pad_mode"), py::arg("y"), py::arg("sy0"), py::arg("sy1"), py::arg("sy2"),
      py::arg("sye"), py::arg("n_out"), py::arg("store"), py::arg("scale"),
      py::arg("twiddles"), py::arg("radices") = std::vector<int>{}, py::arg("points") = 0,
      py::arg("bluestein") = false, PGK_NOGIL,
      "FFTs of rows (native/src/fft/fft.h): log2n for 2^log2n points, or -1 and the radices "
      "(7, 5, 3, 8, 4, 2) of a mixed-radix length (points: their product), or of Bluestein's "
      "convolution length for `points` (bluestein); load 0 complex, 1 real, 2 real pairs, "
      "3 Hermitian; store 0 complex, 1 |X|, 2 |X|^2, 3 real samples");
}
