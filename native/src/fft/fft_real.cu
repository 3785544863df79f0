// The row FFT of real input (zero imaginary parts), both directions (fft_kernel.cuh).
#include "fft/fft_kernel.cuh"

namespace pgk {

void fft_rows_real(const FftArgs& a) {
  if (a.inverse) return fftk::launch_any<true, kReal>(a);
  fftk::launch_any<false, kReal>(a);
}

}  // namespace pgk
