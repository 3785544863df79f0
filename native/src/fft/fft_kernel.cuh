// The row FFT kernel of fft.cu (its comment has the algorithm), templated on the transform's
// points (2^LOG2N), direction and load kind, so the passes, shared-memory indices, twiddle
// strides and the loads are compile-time. A generic kernel with run-time pass loops and
// per-value load switches ran the STFT's rfft 2048 1.25x slower (H100: 0.84 vs 0.67 ms), and
// the kernel is still bound by its instruction issue there (fft.cu has the measurements).
// fft_complex.cu, fft_real.cu and fft_pairs.cu instantiate it (three nvcc processes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "fft/fft.h"
#include "pygpukit_native/check.h"

namespace pgk {
namespace fftk {

__device__ __forceinline__ float2 cadd(float2 a, float2 b) {
  return make_float2(a.x + b.x, a.y + b.y);
}
__device__ __forceinline__ float2 csub(float2 a, float2 b) {
  return make_float2(a.x - b.x, a.y - b.y);
}
__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 conj(float2 a) { return make_float2(a.x, -a.y); }

// a * w_4 (w_4 = -i forward, +i inverse).
template <bool INV>
__device__ __forceinline__ float2 rot4(float2 a) {
  return INV ? make_float2(-a.y, a.x) : make_float2(a.y, -a.x);
}
// a * w_8 and a * w_8^3 (w_8 = (1 - i) / sqrt(2) forward, its conjugate inverse).
template <bool INV>
__device__ __forceinline__ float2 rot8(float2 a) {
  constexpr float c = 0.70710678118654752f;
  return INV ? make_float2(c * (a.x - a.y), c * (a.x + a.y))
             : make_float2(c * (a.x + a.y), c * (a.y - a.x));
}
template <bool INV>
__device__ __forceinline__ float2 rot83(float2 a) {
  constexpr float c = 0.70710678118654752f;
  return INV ? make_float2(-c * (a.x + a.y), c * (a.x - a.y))
             : make_float2(c * (a.y - a.x), -c * (a.x + a.y));
}

// v[0..R) <- its R-point DFT, natural order (radix-2 decimation in time, unrolled).
template <int R, bool INV>
__device__ __forceinline__ void dft(float2* v) {
  if constexpr (R == 2) {
    const float2 a = v[0], b = v[1];
    v[0] = cadd(a, b);
    v[1] = csub(a, b);
  } else if constexpr (R == 4) {
    const float2 a0 = cadd(v[0], v[2]), a1 = csub(v[0], v[2]);
    const float2 a2 = cadd(v[1], v[3]), a3 = rot4<INV>(csub(v[1], v[3]));
    v[0] = cadd(a0, a2);
    v[2] = csub(a0, a2);
    v[1] = cadd(a1, a3);
    v[3] = csub(a1, a3);
  } else if constexpr (R == 8) {
    float2 e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
    dft<4, INV>(e);
    dft<4, INV>(o);
    o[1] = rot8<INV>(o[1]);
    o[2] = rot4<INV>(o[2]);
    o[3] = rot83<INV>(o[3]);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      v[t] = cadd(e[t], o[t]);
      v[t + 4] = csub(e[t], o[t]);
    }
  }
}

// Where shared index i lives: an XOR swizzle within each aligned block of 32 floats, so that a
// warp's accesses hit 32 distinct banks for every pattern the passes use (N >= 64): runs of 32
// (every read, and the writes of passes with Ns >= 32), the first pass's writes 8 lane + t,
// and the second's 64 q + m + 8 t (lane = 8 q + m). With h(b) = (b & 7) | ((b >> 1) & 3) << 3
// of the block number b, the first pattern XORs a constant, the second spreads lane / 4 over
// the low three bits, the third q over bits 3-4 (tests/native/test_fft_banks.py checks a model
// of every pass's accesses; the untangling's reversed run conflicts 2-way where it wraps past 0).
// Measured on an H100 (ncu): a padding of one float every 8 left 2-way conflicts on the reads.
__device__ __forceinline__ int swz(int i) {
  const int b = i >> 5;
  return i ^ ((b & 7) | (((b >> 1) & 3) << 3));
}

constexpr int ipow(int b, int e) { return e == 0 ? 1 : b * ipow(b, e - 1); }

template <int LOG2N>
struct Shape {
  static constexpr int N = 1 << LOG2N;
  static constexpr int RMAX = N >= 8 ? 8 : N;                   // radix of the first passes
  static constexpr int FULL = N >= 8 ? LOG2N / 3 : (N > 1);      // passes of radix RMAX
  static constexpr int RLAST = N >= 8 ? 1 << (LOG2N % 3) : 1;    // a last pass's radix (1: none)
  static constexpr int NP = FULL + (RLAST > 1);                  // passes
  static constexpr int RL = RLAST > 1 ? RLAST : RMAX;            // the last pass's radix
  static constexpr int T = N / RMAX;                             // threads a row
  static constexpr int THREADS = T >= 128 ? T : 128;             // threads a block
  static constexpr int ROWS = THREADS / T;                       // rows a block
  // Pass p's radix and the points of the sub-transforms it combines (Ns = RMAX^p).
  static constexpr int radix(int p) { return p < FULL ? RMAX : RLAST; }
  static constexpr int ns(int p) { return ipow(RMAX, p); }
  // Offset of pass p's twiddles in the table (fft.h): passes with Ns > 1 store
  // w_(Ns R)^(t k) at [t - 1][k] (t < R, k < Ns), so lanes of consecutive k read consecutive
  // entries; the untangling twiddles w_2N^k (k <= N) follow the last pass's.
  static constexpr int tw_offset(int p) {
    return p == 0 ? 0 : tw_offset(p - 1) + (ns(p - 1) > 1 ? ns(p - 1) * (radix(p - 1) - 1) : 0);
  }
  static constexpr int UNTANGLE = tw_offset(NP);
};

// Position p of a signal of n samples padded as np.pad's mode (fft.h): false where constant
// padding makes the value zero, else p becomes the source index.
__device__ __forceinline__ bool pad_source(std::int64_t& p, std::int64_t n, int mode) {
  if (p >= 0 && p < n) return true;
  switch (mode) {
    case 2:  // reflect about the edge sample
      p = p < 0 ? -p : 2 * (n - 1) - p;
      return true;
    case 3:  // symmetric about the edge
      p = p < 0 ? -p - 1 : 2 * n - 1 - p;
      return true;
    case 4:  // edge
      p = p < 0 ? 0 : n - 1;
      return true;
    default:  // constant: zeros
      return false;
  }
}

struct Row {
  std::int64_t x, y, frame;  // offsets of the row's first value; frame start (frames only)
};

template <typename E>
__device__ __forceinline__ float as_float(E v) {
  if constexpr (std::is_same_v<E, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// Real input value q of a row, the general case: frames padded by mapping, values past n_in
// zero, windowed.
template <typename E>
__device__ __forceinline__ float real_value(const FftArgs& a, const Row& row, std::int64_t q) {
  std::int64_t src = q;
  if (a.pad_mode) {
    src = row.frame + q;
    if (!pad_source(src, a.sig_len, a.pad_mode)) return 0.0f;
  } else if (q >= a.n_in) {
    return 0.0f;
  }
  float v = as_float(reinterpret_cast<const E*>(a.x)[row.x + src * a.sxe]);
  if (a.win) v *= as_float(reinterpret_cast<const E*>(a.win)[q]);
  return v;
}

// The real loads (kReal: z[e] = x[e]; kRealPairs: z[e] = x[2e] + i x[2e+1]) of element type E
// into v[t] = z[tid + t T]. A row whose values all lie inside the signal (most STFT frames,
// every unpadded row) reads them through one pointer with no index mapping; contiguous float32
// pairs as one 8-byte load.
template <typename E, int LOAD, int N, int T, int RMAX>
__device__ __forceinline__ void load_real(const FftArgs& a, const Row& row, int tid, float2* v) {
  constexpr int PER = LOAD == kRealPairs ? 2 : 1;  // real values a complex point
  constexpr std::int64_t COUNT = std::int64_t(PER) * N;
  const std::int64_t start = a.pad_mode ? row.frame : 0;
  const bool inside = a.pad_mode ? (start >= 0 && start + COUNT <= a.sig_len) : a.n_in >= COUNT;
  if (!inside) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) {
      const int e = tid + t * T;
      v[t] = PER == 2 ? make_float2(real_value<E>(a, row, 2 * e), real_value<E>(a, row, 2 * e + 1))
                      : make_float2(real_value<E>(a, row, e), 0.0f);
    }
    return;
  }
  const E* p = reinterpret_cast<const E*>(a.x) + row.x + start * a.sxe;
  const E* w = reinterpret_cast<const E*>(a.win);
  if constexpr (PER == 2 && std::is_same_v<E, float>) {
    // float2 loads need 8-byte alignment of the row and of the window (a view may start at an
    // odd float).
    const bool aligned = ((reinterpret_cast<std::uintptr_t>(p) |
                           reinterpret_cast<std::uintptr_t>(w)) & 7) == 0;
    if (a.sxe == 1 && aligned) {
      const float2* p2 = reinterpret_cast<const float2*>(p);
#pragma unroll
      for (int t = 0; t < RMAX; ++t) v[t] = p2[tid + t * T];
      if (w) {
        const float2* w2 = reinterpret_cast<const float2*>(w);
#pragma unroll
        for (int t = 0; t < RMAX; ++t) {
          const float2 wv = __ldg(w2 + tid + t * T);
          v[t].x *= wv.x;
          v[t].y *= wv.y;
        }
      }
      return;
    }
  }
  const std::int64_t s = a.sxe;
#pragma unroll
  for (int t = 0; t < RMAX; ++t) {
    const int e = tid + t * T;
    if constexpr (PER == 2) {
      v[t] = make_float2(as_float(p[2 * e * s]), as_float(p[(2 * e + 1) * s]));
    } else {
      v[t] = make_float2(as_float(p[e * s]), 0.0f);
    }
  }
  if (w) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) {
      const int e = tid + t * T;
      if constexpr (PER == 2) {
        v[t].x *= as_float(w[2 * e]);
        v[t].y *= as_float(w[2 * e + 1]);
      } else {
        v[t].x *= as_float(w[e]);
      }
    }
  }
}

// Complex value q of a row; one 8-byte load where the pairs are contiguous and aligned (an
// imported buffer may sit at an odd float).
__device__ __forceinline__ float2 complex_value(const FftArgs& a, const Row& row,
                                                std::int64_t q) {
  if (q >= a.n_in) return make_float2(0.0f, 0.0f);
  const float* x = reinterpret_cast<const float*>(a.x) + row.x + q * a.sxe;
  const bool pair = a.sxe == 2 && (reinterpret_cast<std::uintptr_t>(x) & 7) == 0;
  return pair ? *reinterpret_cast<const float2*>(x) : make_float2(x[0], x[1]);
}

// v[t] = z[tid + t T], the transform's input (fft.h's loads); wu: the untangling twiddles.
template <int LOAD, int LOG2N, int T, int RMAX>
__device__ __forceinline__ void load_row(const FftArgs& a, const Row& row, int tid,
                                         const float2* wu, float2* v) {
  constexpr int N = 1 << LOG2N;
  if constexpr (LOAD == kReal || LOAD == kRealPairs) {
    switch (a.x_dtype) {
      case DType::f16:
        return load_real<__half, LOAD, N, T, RMAX>(a, row, tid, v);
      case DType::bf16:
        return load_real<__nv_bfloat16, LOAD, N, T, RMAX>(a, row, tid, v);
      default:
        return load_real<float, LOAD, N, T, RMAX>(a, row, tid, v);
    }
  } else if constexpr (LOAD == kHermitian) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) {
      // X[k] with k = 0 and k = N real (numpy ignores their imaginary parts), then
      // Z'[e] = (X[e] + conj(X[N - e])) + i w_2N^-e (X[e] - conj(X[N - e])) = 2 Z[e].
      const int e = tid + t * T;
      float2 xa = complex_value(a, row, e), xb = complex_value(a, row, N - e);
      if (e == 0) xa.y = xb.y = 0.0f;
      const float2 s = cadd(xa, conj(xb)), d = csub(xa, conj(xb));
      const float2 od = cmul(d, conj(__ldg(wu + e)));
      v[t] = make_float2(s.x - od.y, s.y + od.x);
    }
  } else {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) v[t] = complex_value(a, row, tid + t * T);
  }
}

// The scaled value X of output k stored as the call asks (fft.h's stores).
__device__ __forceinline__ void store_x(const FftArgs& a, float* y, std::int64_t k, float2 v) {
  v.x *= a.scale;
  v.y *= a.scale;
  switch (a.store) {
    case kStoreComplex:
      if (k < a.n_out) {
        if (a.sye == 2 && (reinterpret_cast<std::uintptr_t>(y) & 7) == 0) {
          reinterpret_cast<float2*>(y)[k] = v;
        } else {
          y[k * a.sye] = v.x;
          y[k * a.sye + 1] = v.y;
        }
      }
      break;
    case kStoreAbs:
      if (k < a.n_out) y[k * a.sye] = sqrtf(v.x * v.x + v.y * v.y);
      break;
    case kStorePower:
      if (k < a.n_out) y[k * a.sye] = v.x * v.x + v.y * v.y;
      break;
    default:  // kStoreReal: the even and odd samples of an irfft
      if (2 * k < a.n_out) y[2 * k * a.sye] = v.x;
      if (2 * k + 1 < a.n_out) y[(2 * k + 1) * a.sye] = v.y;
  }
}

// One radix-R pass's arithmetic on a thread's RMAX / R butterflies j = tid + g T: the
// twiddles w_(NS R)^(t k) (k = j mod NS; tw: the pass's table), then the R-point DFT.
template <int T, int RMAX, int R, int NS, bool INV>
__device__ __forceinline__ void butterflies(float2* v, int tid, const float2* tw) {
#pragma unroll
  for (int g = 0; g < RMAX / R; ++g) {
    float2* u = v + g * R;
    if constexpr (NS > 1) {
      const float2* tk = tw + ((tid + g * T) & (NS - 1));
#pragma unroll
      for (int t = 1; t < R; ++t) {
        const float2 w = __ldg(tk + (t - 1) * NS);
        u[t] = cmul(u[t], INV ? conj(w) : w);
      }
    }
    dft<R, INV>(u);
  }
}

// Shared memory: the block's rows' planes back to back; rb = the row's first index.
template <int N, int T, int RMAX, int R>
__device__ __forceinline__ void read_pass(float2* v, const float* re, const float* im, int rb,
                                          int tid) {
#pragma unroll
  for (int g = 0; g < RMAX / R; ++g) {
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = swz(rb + tid + g * T + t * (N / R));
      v[g * R + t] = make_float2(re[i], im[i]);
    }
  }
}

template <int N, int T, int RMAX, int R, int NS>
__device__ __forceinline__ void write_pass(const float2* v, float* re, float* im, int rb,
                                           int tid) {
#pragma unroll
  for (int g = 0; g < RMAX / R; ++g) {
    const int j = tid + g * T;
    const int base = rb + (j & ~(NS - 1)) * R + (j & (NS - 1));
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = swz(base + t * NS);
      re[i] = v[g * R + t].x;
      im[i] = v[g * R + t].y;
    }
  }
}

// Passes P.. of the transform: every pass but the first reads, waits for the whole row's reads,
// computes, and (but the last) writes and waits. Pass P has radix RMAX (RLAST for the last of
// a length that is not a power of RMAX) and combines sub-transforms of RMAX^P points.
template <int LOG2N, bool INV, int P>
__device__ __forceinline__ void passes(float2* v, float* re, float* im, int rb, int tid,
                                       const float2* tw) {
  using S = Shape<LOG2N>;
  if constexpr (P < S::NP) {
    constexpr int R = S::radix(P), NS = S::ns(P);
    if constexpr (P > 0) {
      read_pass<S::N, S::T, S::RMAX, R>(v, re, im, rb, tid);
      __syncthreads();
    }
    butterflies<S::T, S::RMAX, R, NS, INV>(v, tid, tw + S::tw_offset(P));
    if constexpr (P + 1 < S::NP) {
      write_pass<S::N, S::T, S::RMAX, R, NS>(v, re, im, rb, tid);
      __syncthreads();
    }
    passes<LOG2N, INV, P + 1>(v, re, im, rb, tid, tw);
  }
}

template <int LOG2N, bool INV, int LOAD>
__global__ void __launch_bounds__(Shape<LOG2N>::THREADS) fft_kernel(const FftArgs a) {
  using S = Shape<LOG2N>;
  constexpr int N = S::N, T = S::T, RMAX = S::RMAX, RL = S::RL;
  __shared__ float re[S::ROWS * N], im[S::ROWS * N];
  const int lr = threadIdx.x / T, tid = threadIdx.x % T, rb = lr * N;
  const std::int64_t r = std::int64_t(blockIdx.x) * S::ROWS + lr;
  const bool live = r < a.rows;
  const float2* tw = reinterpret_cast<const float2*>(a.twiddles);
  Row row{0, 0, 0};
  float2 v[RMAX];
  if (live) {
    const std::int64_t i2 = r % a.d2, t = r / a.d2, i1 = t % a.d1, i0 = t / a.d1;
    row.x = i0 * a.sx0 + i1 * a.sx1 + i2 * a.sx2;
    row.y = i0 * a.sy0 + i1 * a.sy1 + i2 * a.sy2;
    row.frame = i2 * a.hop - a.pad;
    load_row<LOAD, LOG2N, T, RMAX>(a, row, tid, tw + S::UNTANGLE, v);
  } else {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) v[t] = make_float2(0.0f, 0.0f);
  }
  passes<LOG2N, INV, 0>(v, re, im, rb, tid, tw);
  // v holds the last pass's outputs: X[j + t N / RL] for its butterflies j = tid + g T.
  constexpr int NSL = N / RL;
  float* y = reinterpret_cast<float*>(a.y) + row.y;
  if constexpr (LOAD != kRealPairs) {
    if (!live) return;
#pragma unroll
    for (int g = 0; g < RMAX / RL; ++g) {
#pragma unroll
      for (int t = 0; t < RL; ++t) store_x(a, y, tid + g * T + t * NSL, v[g * RL + t]);
    }
  } else {
    // Real pairs: Z in natural order into shared memory, then
    // X[k] = (Z[k] + conj(Z[N - k])) / 2 - i w_2N^k (Z[k] - conj(Z[N - k])) / 2, k = 0..N.
#pragma unroll
    for (int g = 0; g < RMAX / RL; ++g) {
#pragma unroll
      for (int t = 0; t < RL; ++t) {
        const int i = swz(rb + tid + g * T + t * NSL);
        re[i] = v[g * RL + t].x;
        im[i] = v[g * RL + t].y;
      }
    }
    __syncthreads();
    if (!live) return;
#pragma unroll
    for (int g = 0; g <= N / T; ++g) {
      const int k = tid + g * T;
      if (g == N / T && k > N) break;  // the last round: k = N only
      const int ia = swz(rb + (k & (N - 1))), ib = swz(rb + ((N - k) & (N - 1)));
      const float2 za = make_float2(re[ia], im[ia]), zb = make_float2(re[ib], -im[ib]);
      const float2 e = make_float2(0.5f * (za.x + zb.x), 0.5f * (za.y + zb.y));
      const float2 d = make_float2(0.5f * (za.x - zb.x), 0.5f * (za.y - zb.y));
      const float2 o = make_float2(d.y, -d.x);  // d / i
      store_x(a, y, k, cadd(e, cmul(__ldg(tw + S::UNTANGLE + k), o)));
    }
  }
}

template <int LOG2N, bool INV, int LOAD>
void launch_n(const FftArgs& a) {
  using S = Shape<LOG2N>;
  const std::int64_t blocks = (a.rows + S::ROWS - 1) / S::ROWS;
  PGK_REQUIRE_AS("fft_rows", blocks <= 0x7fffffff,
                 std::to_string(a.rows) + " rows are more than one launch takes");
  fft_kernel<LOG2N, INV, LOAD><<<unsigned(blocks), S::THREADS, 0, as_stream(a.stream)>>>(a);
  PGK_CHECK_LAUNCH("fft_rows");
}

// The launch for a.log2n (checked by fft_rows: 0..12).
template <bool INV, int LOAD>
void launch_rows(const FftArgs& a) {
  switch (a.log2n) {
    case 0: return launch_n<0, INV, LOAD>(a);
    case 1: return launch_n<1, INV, LOAD>(a);
    case 2: return launch_n<2, INV, LOAD>(a);
    case 3: return launch_n<3, INV, LOAD>(a);
    case 4: return launch_n<4, INV, LOAD>(a);
    case 5: return launch_n<5, INV, LOAD>(a);
    case 6: return launch_n<6, INV, LOAD>(a);
    case 7: return launch_n<7, INV, LOAD>(a);
    case 8: return launch_n<8, INV, LOAD>(a);
    case 9: return launch_n<9, INV, LOAD>(a);
    case 10: return launch_n<10, INV, LOAD>(a);
    case 11: return launch_n<11, INV, LOAD>(a);
    default: return launch_n<12, INV, LOAD>(a);
  }
}

}  // namespace fftk

// One per load kind, each in its own translation unit (fft_complex.cu, fft_real.cu,
// fft_pairs.cu).
void fft_rows_complex(const FftArgs& a);
void fft_rows_real(const FftArgs& a);
void fft_rows_pairs(const FftArgs& a);

}  // namespace pgk
