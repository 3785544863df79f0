// FFTs of rows in fp32 or fp64: the native twin of pygpukit/backends/triton_kernels/fft.py for
// lengths whose prime factors are 2, 3, 5 and 7 (fft/ifft n <= 4096, rfft/irfft and the STFT
// frames even n <= 8192; half those in fp64) and, by Bluestein, any other up to half those,
// same semantics (numpy.fft's; pygpukit/backends/cpu/fft.py is the reference).
//
// A row is the N-point complex transform of z, held in shared memory in Stockham passes.
// N = 2^log2n runs fft_kernel.cuh's kernel (radix-8 passes, a radix-2 or -4 pass last,
// everything compile-time); any other N runs fft_mixed.cu's (log2n = -1, the radices 7, 5, 3,
// 8, 4, 2 listed in `radix`, passes looped at run time): a 7-smooth N as those passes, any
// other N (bluestein) as Bluestein's convolution on M = 2^k >= 2N - 1 points, `radix` then
// listing M's passes. What z is comes from `load`:
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

// Passes of the mixed-radix kernel: 3^7 = 2187 points take 7, 2 * 3^7 is past 4096.
constexpr int kMaxPasses = 12;
// The mixed-radix kernel runs its passes in the order 7, 5, 3, 8, 4, 2 (the odd radices first:
// the first pass writes at a stride of its radix, free of bank conflicts when odd; Bluestein's
// powers of two have no odd radix, and pad their planes instead: fft_mixed.cu's sidx); `radix`
// lists them so. A radix's place in that order, 6 for one the kernel does not have:
constexpr int fft_radix_slot(int r) {
  return r == 7 ? 0 : r == 5 ? 1 : r == 3 ? 2 : r == 8 ? 3 : r == 4 ? 4 : r == 2 ? 5 : 6;
}

struct FftArgs {
  int device;
  std::uintptr_t stream;
  int log2n;  // the complex transform's points N = 2^log2n, 0..12 (0..11 with f64); -1: mixed
  int points;                // mixed: N, 2..4096 (2..2048 with f64; Bluestein half those)
  bool bluestein;            // mixed: N by Bluestein's convolution of M points
  int npass;                 // mixed: the passes' radices, their product N (Bluestein: M)
  int radix[kMaxPasses];
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
  // for the pair loads, w_2N^k for k <= N (pygpukit/backends/native/fft.py's twiddle_table,
  // for either kernel's radices); then, for Bluestein, the chirp c (N values) and bhat (M).
  // A Bluestein table is for one direction (its chirp's sign).
  std::uintptr_t twiddles;
};

void fft_rows(const FftArgs& a);

// The mixed-radix launch (fft_mixed.cu), called by fft_rows once the arguments are checked.
void fft_rows_mixed(const FftArgs& a);

}  // namespace pgk
