// The row FFT kernel of fft.cu (its comment has the algorithm), templated on the transform's
// points (2^LOG2N), direction and load kind, so the passes, shared-memory indices, twiddle
// strides and the loads are compile-time. A generic kernel with run-time pass loops and
// per-value load switches ran the STFT's rfft 2048 1.25x slower (H100: 0.84 vs 0.67 ms), and
// the kernel is still bound by its instruction issue there (fft.cu has the measurements).
// fft_complex.cu, fft_real.cu and fft_pairs.cu instantiate it (three nvcc processes).
// Real is the precision: float (float2 values) or double (double2 values, fft.h's f64: every
// value, twiddle and the scale in float64; up to 2048 complex points, whose two planes fill
// the 32 KiB of static shared memory that 4096 float points do).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "fft/fft.h"
#include "pygpukit_native/check.h"

namespace pgk {
namespace fftk {

// The complex value type of a precision, and its constructor.
template <typename Real>
struct Cx;
template <>
struct Cx<float> {
  using T = float2;
};
template <>
struct Cx<double> {
  using T = double2;
};
__device__ __forceinline__ float2 mk(float a, float b) { return make_float2(a, b); }
__device__ __forceinline__ double2 mk(double a, double b) { return make_double2(a, b); }

template <typename V>
__device__ __forceinline__ V cadd(V a, V b) {
  return mk(a.x + b.x, a.y + b.y);
}
template <typename V>
__device__ __forceinline__ V csub(V a, V b) {
  return mk(a.x - b.x, a.y - b.y);
}
template <typename V>
__device__ __forceinline__ V cmul(V a, V b) {
  return mk(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
template <typename V>
__device__ __forceinline__ V conj(V a) {
  return mk(a.x, -a.y);
}

// a * w_4 (w_4 = -i forward, +i inverse).
template <bool INV, typename V>
__device__ __forceinline__ V rot4(V a) {
  return INV ? mk(-a.y, a.x) : mk(a.y, -a.x);
}
// a * w_8 and a * w_8^3 (w_8 = (1 - i) / sqrt(2) forward, its conjugate inverse).
template <bool INV, typename V>
__device__ __forceinline__ V rot8(V a) {
  using Real = decltype(a.x);
  constexpr Real c = Real(0.70710678118654752440);
  return INV ? mk(c * (a.x - a.y), c * (a.x + a.y)) : mk(c * (a.x + a.y), c * (a.y - a.x));
}
template <bool INV, typename V>
__device__ __forceinline__ V rot83(V a) {
  using Real = decltype(a.x);
  constexpr Real c = Real(0.70710678118654752440);
  return INV ? mk(-c * (a.x + a.y), c * (a.x - a.y)) : mk(c * (a.y - a.x), -c * (a.x + a.y));
}

// cos and sin of 2 pi m / R for the odd radices 3, 5, 7 (m < R), to 21 digits: literals, so
// that an unrolled odd DFT folds them into its multiplies.
__host__ __device__ constexpr double root_cos(int r, int m) {
  const int h = m <= r / 2 ? m : r - m;  // cos(2 pi (R - m) / R) = cos(2 pi m / R)
  if (h == 0) return 1.0;
  if (r == 3) return -0.5;
  if (r == 5) return h == 1 ? 0.309016994374947424102 : -0.809016994374947424102;
  return h == 1 ? 0.623489801858733530525 : h == 2 ? -0.222520933956314404289
                                                   : -0.900968867902419126236;
}
__host__ __device__ constexpr double root_sin(int r, int m) {
  const int h = m <= r / 2 ? m : r - m;  // sin(2 pi (R - m) / R) = -sin(2 pi m / R)
  const double s = h == 0   ? 0.0
                   : r == 3 ? 0.866025403784438646764
                   : r == 5 ? (h == 1 ? 0.951056516295153572116 : 0.587785252292473129169)
                            : (h == 1   ? 0.781831482468029808708
                               : h == 2 ? 0.974927912181823607018
                                        : 0.433883739117558120476);
  return m <= r / 2 ? s : -s;
}

// The R-point DFT of odd R from the sums and differences of the pairs (t, R - t):
// X[k] = x0 + sum_t cos(2 pi t k / R) (x_t + x_(R-t)) -+ i sum_t sin(2 pi t k / R) (x_t - x_(R-t)),
// the sign - for X[k] and + for X[R - k] (forward; the inverse swaps them): (R - 1)^2 / 2 real
// multiply-adds a component instead of (R - 1)^2.
template <int R, bool INV, typename V>
__device__ __forceinline__ void dft_odd(V* v) {
  using Real = decltype(v[0].x);
  constexpr int H = (R - 1) / 2;
  V s[H], d[H];
#pragma unroll
  for (int t = 1; t <= H; ++t) {
    s[t - 1] = cadd(v[t], v[R - t]);
    d[t - 1] = csub(v[t], v[R - t]);
  }
  const V x0 = v[0];
  V sum = x0;
#pragma unroll
  for (int t = 0; t < H; ++t) sum = cadd(sum, s[t]);
  v[0] = sum;
#pragma unroll
  for (int k = 1; k <= H; ++k) {
    V c = x0, b = mk(Real(0), Real(0));
#pragma unroll
    for (int t = 1; t <= H; ++t) {
      const Real cs = Real(root_cos(R, (t * k) % R)), sn = Real(root_sin(R, (t * k) % R));
      c = mk(c.x + cs * s[t - 1].x, c.y + cs * s[t - 1].y);
      b = mk(b.x + sn * d[t - 1].x, b.y + sn * d[t - 1].y);
    }
    const V ib = mk(-b.y, b.x);  // i b
    v[k] = INV ? cadd(c, ib) : csub(c, ib);
    v[R - k] = INV ? csub(c, ib) : cadd(c, ib);
  }
}

// v[0..R) <- its R-point DFT, natural order (radix-2 decimation in time, unrolled; the odd
// radices as dft_odd).
template <int R, bool INV, typename V>
__device__ __forceinline__ void dft(V* v) {
  if constexpr (R % 2 == 1) {
    if constexpr (R > 1) dft_odd<R, INV>(v);
  } else if constexpr (R == 2) {
    const V a = v[0], b = v[1];
    v[0] = cadd(a, b);
    v[1] = csub(a, b);
  } else if constexpr (R == 4) {
    const V a0 = cadd(v[0], v[2]), a1 = csub(v[0], v[2]);
    const V a2 = cadd(v[1], v[3]), a3 = rot4<INV>(csub(v[1], v[3]));
    v[0] = cadd(a0, a2);
    v[2] = csub(a0, a2);
    v[1] = cadd(a1, a3);
    v[3] = csub(a1, a3);
  } else if constexpr (R == 8) {
    V e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
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

// float64 transforms up to 2^11 complex points: two planes of 2048 doubles are the 32 KiB of
// static shared memory the 4096-point float kernel uses.
constexpr int kMaxLog2F64 = 11;

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

template <typename Real, typename E>
__device__ __forceinline__ Real as_real(E v) {
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
template <typename Real, typename E>
__device__ __forceinline__ Real real_value(const FftArgs& a, const Row& row, std::int64_t q) {
  std::int64_t src = q;
  if (a.pad_mode) {
    src = row.frame + q;
    if (!pad_source(src, a.sig_len, a.pad_mode)) return Real(0);
  } else if (q >= a.n_in) {
    return Real(0);
  }
  Real v = as_real<Real>(reinterpret_cast<const E*>(a.x)[row.x + src * a.sxe]);
  if (a.win) v *= as_real<Real>(reinterpret_cast<const E*>(a.win)[q]);
  return v;
}

// The real loads (kReal: z[e] = x[e]; kRealPairs: z[e] = x[2e] + i x[2e+1]) of element type E
// into v[t] = z[tid + t T]. A row whose values all lie inside the signal (most STFT frames,
// every unpadded row) reads them through one pointer with no index mapping; contiguous pairs
// of the working precision as one vector load.
template <typename Real, typename E, int LOAD, int N, int T, int RMAX>
__device__ __forceinline__ void load_real(const FftArgs& a, const Row& row, int tid,
                                          typename Cx<Real>::T* v) {
  using V = typename Cx<Real>::T;
  constexpr int PER = LOAD == kRealPairs ? 2 : 1;  // real values a complex point
  constexpr std::int64_t COUNT = std::int64_t(PER) * N;
  const std::int64_t start = a.pad_mode ? row.frame : 0;
  const bool inside = a.pad_mode ? (start >= 0 && start + COUNT <= a.sig_len) : a.n_in >= COUNT;
  if (!inside) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) {
      const int e = tid + t * T;
      v[t] = PER == 2 ? mk(real_value<Real, E>(a, row, 2 * e),
                           real_value<Real, E>(a, row, 2 * e + 1))
                      : mk(real_value<Real, E>(a, row, e), Real(0));
    }
    return;
  }
  const E* p = reinterpret_cast<const E*>(a.x) + row.x + start * a.sxe;
  const E* w = reinterpret_cast<const E*>(a.win);
  if constexpr (PER == 2 && std::is_same_v<E, Real>) {
    // Vector loads need the row and the window aligned to a pair (a view may start at an odd
    // element).
    const bool aligned = ((reinterpret_cast<std::uintptr_t>(p) |
                           reinterpret_cast<std::uintptr_t>(w)) & (sizeof(V) - 1)) == 0;
    if (a.sxe == 1 && aligned) {
      const V* p2 = reinterpret_cast<const V*>(p);
#pragma unroll
      for (int t = 0; t < RMAX; ++t) v[t] = p2[tid + t * T];
      if (w) {
        const V* w2 = reinterpret_cast<const V*>(w);
#pragma unroll
        for (int t = 0; t < RMAX; ++t) {
          const V wv = __ldg(w2 + tid + t * T);
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
      v[t] = mk(as_real<Real>(p[2 * e * s]), as_real<Real>(p[(2 * e + 1) * s]));
    } else {
      v[t] = mk(as_real<Real>(p[e * s]), Real(0));
    }
  }
  if (w) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) {
      const int e = tid + t * T;
      if constexpr (PER == 2) {
        v[t].x *= as_real<Real>(w[2 * e]);
        v[t].y *= as_real<Real>(w[2 * e + 1]);
      } else {
        v[t].x *= as_real<Real>(w[e]);
      }
    }
  }
}

// Complex value q of a row; one vector load where the pairs are contiguous and aligned (an
// imported buffer may sit at an odd element).
template <typename Real>
__device__ __forceinline__ typename Cx<Real>::T complex_value(const FftArgs& a, const Row& row,
                                                              std::int64_t q) {
  using V = typename Cx<Real>::T;
  if (q >= a.n_in) return mk(Real(0), Real(0));
  const Real* x = reinterpret_cast<const Real*>(a.x) + row.x + q * a.sxe;
  const bool pair = a.sxe == 2 && (reinterpret_cast<std::uintptr_t>(x) & (sizeof(V) - 1)) == 0;
  return pair ? *reinterpret_cast<const V*>(x) : mk(x[0], x[1]);
}

// Point e < N of an irfft's half-length transform (the Hermitian load): X[k] with k = 0 and
// k = N real (numpy ignores their imaginary parts), then
// Z'[e] = (X[e] + conj(X[N - e])) + i w_2N^-e (X[e] - conj(X[N - e])) = 2 Z[e].
template <typename Real>
__device__ __forceinline__ typename Cx<Real>::T hermitian_z(const FftArgs& a, const Row& row,
                                                            int e, int n,
                                                            const typename Cx<Real>::T* wu) {
  using V = typename Cx<Real>::T;
  V xa = complex_value<Real>(a, row, e), xb = complex_value<Real>(a, row, n - e);
  if (e == 0) xa.y = xb.y = Real(0);
  const V s = cadd(xa, conj(xb)), d = csub(xa, conj(xb));
  const V od = cmul(d, conj(__ldg(wu + e)));
  return mk(s.x - od.y, s.y + od.x);
}

// An rfft's term X[k] from the half-length transform's Z[k] (za) and conj(Z[N - k]) (zb):
// X[k] = (Z[k] + conj(Z[N - k])) / 2 - i w_2N^k (Z[k] - conj(Z[N - k])) / 2.
template <typename V>
__device__ __forceinline__ V untangle_x(V za, V zb, V w) {
  using Real = decltype(za.x);
  constexpr Real half = Real(0.5);
  const V e = mk(half * (za.x + zb.x), half * (za.y + zb.y));
  const V d = mk(half * (za.x - zb.x), half * (za.y - zb.y));
  const V o = mk(d.y, -d.x);  // d / i
  return cadd(e, cmul(w, o));
}

// v[t] = z[tid + t T], the transform's input (fft.h's loads); wu: the untangling twiddles.
template <typename Real, int LOAD, int LOG2N, int T, int RMAX>
__device__ __forceinline__ void load_row(const FftArgs& a, const Row& row, int tid,
                                         const typename Cx<Real>::T* wu,
                                         typename Cx<Real>::T* v) {
  using V = typename Cx<Real>::T;
  constexpr int N = 1 << LOG2N;
  if constexpr (LOAD == kReal || LOAD == kRealPairs) {
    if constexpr (std::is_same_v<Real, double>) {
      return load_real<double, double, LOAD, N, T, RMAX>(a, row, tid, v);
    } else {
      switch (a.x_dtype) {
        case DType::f16:
          return load_real<float, __half, LOAD, N, T, RMAX>(a, row, tid, v);
        case DType::bf16:
          return load_real<float, __nv_bfloat16, LOAD, N, T, RMAX>(a, row, tid, v);
        default:
          return load_real<float, float, LOAD, N, T, RMAX>(a, row, tid, v);
      }
    }
  } else if constexpr (LOAD == kHermitian) {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) v[t] = hermitian_z<Real>(a, row, tid + t * T, N, wu);
  } else {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) v[t] = complex_value<Real>(a, row, tid + t * T);
  }
}

// The scaled value X of output k stored as the call asks (fft.h's stores).
template <typename Real, typename V>
__device__ __forceinline__ void store_x(const FftArgs& a, Real* y, std::int64_t k, V v) {
  const Real scale = Real(a.scale);
  v.x *= scale;
  v.y *= scale;
  switch (a.store) {
    case kStoreComplex:
      if (k < a.n_out) {
        if (a.sye == 2 && (reinterpret_cast<std::uintptr_t>(y) & (sizeof(V) - 1)) == 0) {
          reinterpret_cast<V*>(y)[k] = v;
        } else {
          y[k * a.sye] = v.x;
          y[k * a.sye + 1] = v.y;
        }
      }
      break;
    case kStoreAbs:
      if (k < a.n_out) y[k * a.sye] = sqrt(v.x * v.x + v.y * v.y);
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
template <int T, int RMAX, int R, int NS, bool INV, typename V>
__device__ __forceinline__ void butterflies(V* v, int tid, const V* tw) {
#pragma unroll
  for (int g = 0; g < RMAX / R; ++g) {
    V* u = v + g * R;
    if constexpr (NS > 1) {
      const V* tk = tw + ((tid + g * T) & (NS - 1));
#pragma unroll
      for (int t = 1; t < R; ++t) {
        const V w = __ldg(tk + (t - 1) * NS);
        u[t] = cmul(u[t], INV ? conj(w) : w);
      }
    }
    dft<R, INV>(u);
  }
}

// Shared memory: the block's rows' planes back to back; rb = the row's first index.
template <int N, int T, int RMAX, int R, typename Real, typename V>
__device__ __forceinline__ void read_pass(V* v, const Real* re, const Real* im, int rb,
                                          int tid) {
#pragma unroll
  for (int g = 0; g < RMAX / R; ++g) {
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = swz(rb + tid + g * T + t * (N / R));
      v[g * R + t] = mk(re[i], im[i]);
    }
  }
}

template <int N, int T, int RMAX, int R, int NS, typename Real, typename V>
__device__ __forceinline__ void write_pass(const V* v, Real* re, Real* im, int rb, int tid) {
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
template <int LOG2N, bool INV, int P, typename Real, typename V>
__device__ __forceinline__ void passes(V* v, Real* re, Real* im, int rb, int tid, const V* tw) {
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

template <int LOG2N, bool INV, int LOAD, typename Real>
__global__ void __launch_bounds__(Shape<LOG2N>::THREADS) fft_kernel(const FftArgs a) {
  using S = Shape<LOG2N>;
  using V = typename Cx<Real>::T;
  constexpr int N = S::N, T = S::T, RMAX = S::RMAX, RL = S::RL;
  __shared__ Real re[S::ROWS * N], im[S::ROWS * N];
  const int lr = threadIdx.x / T, tid = threadIdx.x % T, rb = lr * N;
  const std::int64_t r = std::int64_t(blockIdx.x) * S::ROWS + lr;
  const bool live = r < a.rows;
  const V* tw = reinterpret_cast<const V*>(a.twiddles);
  Row row{0, 0, 0};
  V v[RMAX];
  if (live) {
    const std::int64_t i2 = r % a.d2, t = r / a.d2, i1 = t % a.d1, i0 = t / a.d1;
    row.x = i0 * a.sx0 + i1 * a.sx1 + i2 * a.sx2;
    row.y = i0 * a.sy0 + i1 * a.sy1 + i2 * a.sy2;
    row.frame = i2 * a.hop - a.pad;
    load_row<Real, LOAD, LOG2N, T, RMAX>(a, row, tid, tw + S::UNTANGLE, v);
  } else {
#pragma unroll
    for (int t = 0; t < RMAX; ++t) v[t] = mk(Real(0), Real(0));
  }
  passes<LOG2N, INV, 0>(v, re, im, rb, tid, tw);
  // v holds the last pass's outputs: X[j + t N / RL] for its butterflies j = tid + g T.
  constexpr int NSL = N / RL;
  Real* y = reinterpret_cast<Real*>(a.y) + row.y;
  if constexpr (LOAD != kRealPairs) {
    if (!live) return;
#pragma unroll
    for (int g = 0; g < RMAX / RL; ++g) {
#pragma unroll
      for (int t = 0; t < RL; ++t) store_x(a, y, tid + g * T + t * NSL, v[g * RL + t]);
    }
  } else {
    // Real pairs: Z in natural order into shared memory, then X[k], k = 0..N (untangle_x).
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
      const V za = mk(re[ia], im[ia]), zb = mk(re[ib], -im[ib]);
      store_x(a, y, k, untangle_x(za, zb, __ldg(tw + S::UNTANGLE + k)));
    }
  }
}

template <int LOG2N, bool INV, int LOAD, typename Real>
void launch_n(const FftArgs& a) {
  using S = Shape<LOG2N>;
  if constexpr (std::is_same_v<Real, double> && LOG2N > kMaxLog2F64) {
    fail("fft_rows", "float64 transforms take at most 2^" + std::to_string(kMaxLog2F64) +
                         " complex points, got 2^" + std::to_string(LOG2N));
  } else {
    const std::int64_t blocks = (a.rows + S::ROWS - 1) / S::ROWS;
    PGK_REQUIRE_AS("fft_rows", blocks <= 0x7fffffff,
                   std::to_string(a.rows) + " rows are more than one launch takes");
    fft_kernel<LOG2N, INV, LOAD, Real><<<unsigned(blocks), S::THREADS, 0, as_stream(a.stream)>>>(a);
    PGK_CHECK_LAUNCH("fft_rows");
  }
}

// The launch for a.log2n (checked by fft_rows: 0..12).
template <bool INV, int LOAD, typename Real>
void launch_rows(const FftArgs& a) {
  switch (a.log2n) {
    case 0: return launch_n<0, INV, LOAD, Real>(a);
    case 1: return launch_n<1, INV, LOAD, Real>(a);
    case 2: return launch_n<2, INV, LOAD, Real>(a);
    case 3: return launch_n<3, INV, LOAD, Real>(a);
    case 4: return launch_n<4, INV, LOAD, Real>(a);
    case 5: return launch_n<5, INV, LOAD, Real>(a);
    case 6: return launch_n<6, INV, LOAD, Real>(a);
    case 7: return launch_n<7, INV, LOAD, Real>(a);
    case 8: return launch_n<8, INV, LOAD, Real>(a);
    case 9: return launch_n<9, INV, LOAD, Real>(a);
    case 10: return launch_n<10, INV, LOAD, Real>(a);
    case 11: return launch_n<11, INV, LOAD, Real>(a);
    default: return launch_n<12, INV, LOAD, Real>(a);
  }
}

// Both precisions of one load kind and direction.
template <bool INV, int LOAD>
void launch_any(const FftArgs& a) {
  if (a.f64) return launch_rows<INV, LOAD, double>(a);
  launch_rows<INV, LOAD, float>(a);
}

}  // namespace fftk

// One per load kind, each in its own translation unit (fft_complex.cu, fft_real.cu,
// fft_pairs.cu).
void fft_rows_complex(const FftArgs& a);
void fft_rows_real(const FftArgs& a);
void fft_rows_pairs(const FftArgs& a);

}  // namespace pgk
