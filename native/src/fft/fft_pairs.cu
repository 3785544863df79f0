// The half-length transforms of rfft (real pairs, forward) and irfft (Hermitian, inverse)
// (fft_kernel.cuh).
#include "fft/fft_kernel.cuh"

namespace pgk {

void fft_rows_pairs(const FftArgs& a) {
  if (a.load == kHermitian) return fftk::launch_any<true, kHermitian>(a);
  fftk::launch_any<false, kRealPairs>(a);
}

}  // namespace pgk
