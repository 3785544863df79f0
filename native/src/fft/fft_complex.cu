// The row FFT of complex input, both directions (fft_kernel.cuh).
#include "fft/fft_kernel.cuh"

namespace pgk {

void fft_rows_complex(const FftArgs& a) {
  if (a.inverse) return fftk::launch_any<true, kComplex>(a);
  fftk::launch_any<false, kComplex>(a);
}

}  // namespace pgk
