// The row FFT of complex input, both directions (fft_kernel.cuh).
#include "fft/fft_kernel.cuh"

namespace pgk {

void fft_rows_complex(const FftArgs& a) {
  if (a.inverse) return fftk::launch_rows<true, kComplex>(a);
  fftk::launch_rows<false, kComplex>(a);
}

}  // namespace pgk
