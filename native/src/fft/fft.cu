// Row FFTs (fft.h): the entry point and its checks. Powers of two run fft_kernel.cuh's kernel,
// one row of N = 2^log2n complex points per N / 8 threads, held in shared memory between passes;
// other lengths run fft_mixed.cu's, the same algorithm with run-time radices.
//
// Algorithm: Stockham autosort (Van Loan 1.7; the GPU form of Govindaraju et al., SC 2008).
// After the passes so far, shared memory holds N / Ns sub-transforms of Ns points each
// (sub-transform s covers samples s, s + N / Ns, ...). A radix-R pass combines sub-transforms
// q + t Q (t < R, Q = N / (Ns R)) into sub-transform q of Ns R points: butterfly j = q Ns + k
// reads element j + t N / R, multiplies it by w_(Ns R)^(t k), takes the R-point DFT in
// registers and writes output t to (j / Ns) Ns R + k + t Ns. The result comes out in natural
// order, with no digit reversal. Radix 8 for every pass but the last (2, 4 or 8), so N / 8
// threads do every pass. The first pass reads its inputs straight from global memory (j + t N/8
// is thread j's t-th load, coalesced across threads). The last pass writes the result straight
// to global memory, again coalesced, unless the real-pairs untangling needs Z[k] and Z[N - k]
// from shared memory.
//
// Why radix-8 FMA passes here, where the Triton twin uses DFT products on tensor cores: a
// power-of-two transform needs 5 N log2 N / 2 flops on average (a few percent of the fp32 rate
// at the memory rate), so the limit is memory and shared-memory traffic. Four passes for
// N = 1024 cost 8 shared-memory accesses a point. A dense DFT product costs RP multiply-adds a
// point a pass, and tensor cores reach fp32 accuracy only in three tf32 passes.
//
// Shared memory holds the real and imaginary planes separately, XOR-swizzled within blocks of
// 32 floats (fft_kernel.cuh's swz) so that no pass's reads or writes conflict on banks.
//
// Twiddles come from one float2 table a length, rounded once from float64
// (pygpukit/backends/native/fft.py builds it): pass p's w_(Ns R)^(t k) at [t - 1][k] (lanes of
// consecutive k read consecutive entries: coalesced), then the untangling step's w_2N^k. An
// inverse conjugates them.
//
// Measured on an H100 (96000 rows): fft 512 at 99% of the device copy rate; the first version
// (run-time pass loops, per-value load switches, a padded layout with 2-way conflicts, strided
// twiddle reads) ran the STFT's rfft 2048 kernel at 98.5% of the L1/shared-memory throughput
// and 32% of DRAM.
#include "fft/fft.h"

#include <string>

#include "fft/fft_kernel.cuh"
#include "pygpukit_native/check.h"

namespace pgk {

void fft_rows(const FftArgs& a) {
  const bool mixed = a.log2n == -1;
  PGK_REQUIRE(mixed || (a.log2n >= 0 && a.log2n <= 12),
              "log2n must be in 0..12 (2^log2n complex points) or -1 (mixed radices), got " +
                  std::to_string(a.log2n));
  if (mixed) {
    const int top = (a.f64 ? 1 << fftk::kMaxLog2F64 : 4096) / (a.bluestein ? 2 : 1);
    PGK_REQUIRE(a.points >= 2 && a.points <= top,
                std::string(a.bluestein ? "Bluestein" : "mixed-radix") + " transforms take 2.." +
                    std::to_string(top) + " points, got " + std::to_string(a.points));
    PGK_REQUIRE(a.npass >= 1 && a.npass <= kMaxPasses,
                "mixed-radix transforms take 1.." + std::to_string(kMaxPasses) +
                    " passes, got " + std::to_string(a.npass));
    std::int64_t product = 1;
    for (int p = 0; p < a.npass; ++p) {
      const int r = a.radix[p];
      PGK_REQUIRE(fft_radix_slot(r) < 6,
                  "radix " + std::to_string(r) + " is not one of 7, 5, 3, 8, 4, 2");
      PGK_REQUIRE(p == 0 || fft_radix_slot(a.radix[p - 1]) <= fft_radix_slot(r),
                  "the radices must come in the order 7, 5, 3, 8, 4, 2");
      product *= r;
    }
    if (a.bluestein) {
      PGK_REQUIRE((product & (product - 1)) == 0 && product >= 2 * a.points - 1 &&
                      product < 4 * a.points,
                  "Bluestein's convolution of " + std::to_string(a.points) +
                      " points takes the power of two in [2N - 1, 4N), got " +
                      std::to_string(product));
    } else {
      PGK_REQUIRE(product == a.points, "the radices' product " + std::to_string(product) +
                                           " is not the points " + std::to_string(a.points));
    }
  }
  PGK_REQUIRE(a.load >= kComplex && a.load <= kHermitian, "unknown load");
  PGK_REQUIRE(!(a.load == kRealPairs && a.inverse) && !(a.load == kHermitian && !a.inverse),
              "real pairs are forward (rfft), Hermitian loads inverse (irfft)");
  PGK_REQUIRE(a.store >= kStoreComplex && a.store <= kStoreReal, "unknown store");
  PGK_REQUIRE(a.pad_mode >= 0 && a.pad_mode <= 4, "unknown pad_mode");
  const bool half_ok = (a.load == kReal || a.load == kRealPairs) &&
                       (a.x_dtype == DType::f16 || a.x_dtype == DType::bf16);
  PGK_REQUIRE(a.f64 ? a.x_dtype == DType::f64 : (a.x_dtype == DType::f32 || half_ok),
              std::string("x dtype ") + dtype_name(a.x_dtype) + " does not fit the load" +
                  (a.f64 ? " (float64 transforms read float64)" : ""));
  PGK_REQUIRE(!a.f64 || mixed || a.log2n <= fftk::kMaxLog2F64,
              "float64 transforms take at most 2^" + std::to_string(fftk::kMaxLog2F64) +
                  " complex points, got 2^" + std::to_string(a.log2n));
  PGK_REQUIRE(a.rows >= 0 && a.d1 >= 1 && a.d2 >= 1, "bad row counts");
  PGK_REQUIRE(a.twiddles != 0, "no twiddle table");
  if (a.rows == 0) return;
  use_device(a.device);
  if (mixed) return fft_rows_mixed(a);
  switch (a.load) {
    case kComplex:
      return fft_rows_complex(a);
    case kReal:
      return fft_rows_real(a);
    default:
      return fft_rows_pairs(a);
  }
}

}  // namespace pgk
