// Power-of-two FFTs of rows in fp32 or fp64: the native twin of pygpukit/backends/triton_kernels/fft.py
// for n = 2^k (fft/ifft n <= 4096, rfft/irfft and the STFT frames n <= 8192), same semantics
// (numpy.fft's; pygpukit/backends/cpu/fft.py is the reference).
//
// A row is the N = 2^log2n point complex transform of z, held in shared memory by N / 8
// threads (radix-8 Stockham passes, a radix-2 or -4 pass last). What z is comes from `load`:
//   kComplex       z[j] = x[j] (complex64 read as float32 pairs);
//   kReal          z[j] = x[j] + 0i;
//   kRealPairs     z[j] = x[2j] + i x[2j+1]: an rfft of 2N real values, untangled after the
//                  transform into its N + 1 terms (X[k] from Z[k] and conj(Z[N - k]));
//   kHermitian     z from the N + 1 terms of an irfft's input (the inverse untangling), whose
//                  transform's real and imaginary parts are the even and odd output samples.
// Values past n_in (input values a row has) are zeros; a window multiplies real values as they
// load. With frames (pad_mode != 0) row (b, f) reads samples f * hop - pad + i of signal b,
// positions outside the signal mapped as np.pad's pad_mode (1 constant, 2 reflect,
// 3 symmetric, 4 edge; one reflection). `store`: kStoreComplex, |X| (kStoreAbs), |X|^2
// (kStorePower) or the real samples of an irfft (kStoreReal); the first n_out values a row.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

enum FftLoad : int { kComplex = 0, kReal = 1, kRealPairs = 2, kHermitian = 3 };
enum FftStore : int { kStoreComplex = 0, kStoreAbs = 1, kStorePower = 2, kStoreReal = 3 };

struct FftArgs {
  int device;
  std::uintptr_t stream;
  int log2n;  // the complex transform's points N = 2^log2n, 0..12 (0..11 with f64)
  bool inverse;
  bool f64;        // float64 values (x, window, y, twiddles) and arithmetic; else float32
  int load;        // FftLoad
  DType x_dtype;   // real loads: float32/float16/bfloat16 (float64 with f64); complex loads:
                   // float32 pairs (float64 pairs with f64)
  std::uintptr_t x;
  std::int64_t rows, d1, d2;  // row r = (r / (d1 d2), r / d2 % d1, r % d2)
  std::int64_t sx0, sx1, sx2, sxe;  // element strides (float units for complex x)
  std::int64_t n_in;                // values a row has (real values for kRealPairs)
  std::uintptr_t win;               // 0 or one real value per real input value, x's dtype
  std::int64_t hop, pad, sig_len;   // frames: row (i0, b, f) reads signal b at f * hop - pad
  int pad_mode;                     // 0: no frames; 1..4 as above
  std::uintptr_t y;                 // float32 (float64 with f64); complex results as pairs
  std::int64_t sy0, sy1, sy2, sye;  // float units
  std::int64_t n_out;
  int store;  // FftStore
  double scale;
  // float2 twiddles (fft.cu): each pass after the first, w_(Ns R)^(t k) at [t - 1][k]; then,
  // for the pair loads, w_2N^k for k <= N (pygpukit/backends/native/fft.py's twiddle_table).
  std::uintptr_t twiddles;
};

void fft_rows(const FftArgs& a);

}  // namespace pgk
