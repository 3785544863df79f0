// Row FFTs of any length but a power of two (fft.h, log2n = -1): lengths whose prime factors are
// 2, 3, 5 and 7 (Whisper's 400-point frames: an rfft through 200 = 5 x 5 x 8 complex points;
// 1000, 480, 1200 ...) as Stockham passes, and any other length by Bluestein's convolution on a
// power of two M >= 2N - 1 points (fft_mixed_kernel's comment). The same Stockham autosort as
// fft.cu (its comment has the algorithm) with the length's radices (pygpukit/backends/native/
// fft.py's mixed_radices, in fft.h's order: the odd ones first, then 8s, then a 4 or 2) given at
// run time, and the same loads and stores (fft_kernel.cuh's helpers), so the two kernels give
// one op the same semantics.
//
// Why a second kernel and not more instances of the first: the power-of-two kernel is
// compile-time in its length (its passes, indices and loads unrolled; 1.25x faster than a
// run-time version on the STFT's rfft 2048), which suits 13 lengths, not the hundreds of
// 7-smooth ones up to 4096. Here a length is data: ceil(len / 8) threads a row take a pass's
// len / R butterflies in turn (each radix's passes a loop of one pass unrolled for it), and the
// row sits in shared memory in two buffers that the passes read and write in turn (one plane
// each for the real and imaginary parts; a pass reads runs of consecutive points, its writes
// stride by the radix in the first pass, odd for the odd radices, which go first for that
// reason; row_size and sidx keep the rest of the bank conflicts down).
//
// The row is loaded into shared memory first (global reads coalesced across threads), every
// pass reads one buffer, computes, writes the other and waits, and the result leaves from
// shared memory in natural order (the real pairs' untangling reads Z[k] and Z[N - k] there).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "fft/fft.h"
#include "fft/fft_kernel.cuh"
#include "pygpukit_native/check.h"

namespace pgk {
namespace fftk {
namespace {

// z[e] of a row (fft.h's loads), e < n: the general path of each load (no vector loads).
template <typename Real, typename E, int LOAD>
__device__ __forceinline__ typename Cx<Real>::T mixed_z(const FftArgs& a, const Row& row, int e,
                                                        int n, const typename Cx<Real>::T* wu) {
  if constexpr (LOAD == kReal) {
    return mk(real_value<Real, E>(a, row, e), Real(0));
  } else if constexpr (LOAD == kRealPairs) {
    return mk(real_value<Real, E>(a, row, 2 * e), real_value<Real, E>(a, row, 2 * e + 1));
  } else if constexpr (LOAD == kHermitian) {
    return hermitian_z<Real>(a, row, e, n, wu);
  } else {
    return complex_value<Real>(a, row, e);
  }
}

// A row's place in shared memory. Its four planes (two buffers of a real and an imaginary
// plane) hold len points each, and, with PAD (Bluestein's power-of-two passes), one spare float
// after every 32: a radix-8 first pass writes at a stride of 8 points, 8-way bank conflicts
// plainly, and 1.4 wavefronts an access on average padded against 2.25 (a model of every
// pass's accesses; the 7-smooth lengths' passes measure worse padded, 1.6-2.0 against
// 1.3-1.9). Each row then starts t_row floats of banks after the one before (mod 32), so that
// a warp's lanes that cross into the next row continue its banks instead of repeating them
// (rfft 400's 25 threads a row: 1.94 wavefronts an access without, 1.32 with).
__host__ __device__ inline int padded(int i, bool pad) { return pad ? i + (i >> 5) : i; }
template <bool PAD>
__device__ __forceinline__ int sidx(int i) {
  return padded(i, PAD);
}
__host__ __device__ inline int plane_size(int len, bool pad) { return padded(len, pad); }
__host__ __device__ inline int row_size(int len, int t_row, bool pad) {
  const int planes = 4 * plane_size(len, pad);
  return planes + ((t_row - planes) % 32 + 32) % 32;
}

// One radix-R pass over a row of n points, combining sub-transforms of ns points: butterfly
// j = q ns + k reads src[j + t n / R], multiplies by w_(ns R)^(t k) (tw: the pass's table,
// [t - 1][k]), takes the R-point DFT and writes output t to dst[q ns R + k + t ns]; then the
// block waits. A thread's butterflies are j = tid + g t_row (t_row = ceil(n / 8)), one at a
// time: reading one buffer and writing the other keeps only R values live (in place, a thread
// held all its butterflies across a barrier between the reads and the writes: 101 registers a
// thread and two barriers a pass). q = j / ns in float arithmetic: (j + 1/2) / ns sits at least
// 1 / (2 ns) from an integer and is below n / ns, so two roundings (n 2^-23 / ns) cannot cross
// one (an integer division by a run-time divisor costs about 20 instructions).
template <int R, bool INV, bool PAD, typename Real>
__device__ __forceinline__ void mixed_pass(const Real* src, Real* dst, int n, int stride, int ns,
                                           int tid, int t_row, const typename Cx<Real>::T* tw) {
  using V = typename Cx<Real>::T;
  const int m = n / R;
  const float inv_ns = 1.0f / float(ns);
  for (int j = tid; j < m; j += t_row) {
    V u[R];
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = sidx<PAD>(j + t * m);
      u[t] = mk(src[i], src[stride + i]);
    }
    const int q = int((float(j) + 0.5f) * inv_ns), k = j - q * ns;
    if (ns > 1) {
#pragma unroll
      for (int t = 1; t < R; ++t) {
        const V f = __ldg(tw + (t - 1) * ns + k);
        u[t] = cmul(u[t], INV ? conj(f) : f);
      }
    }
    dft<R, INV>(u);
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = sidx<PAD>(q * ns * R + k + t * ns);
      dst[i] = u[t].x;
      dst[stride + i] = u[t].y;
    }
  }
  __syncthreads();
}

// Most threads a block: ceil(4096 / 8) float rows, ceil(2048 / 8) float64 rows.
template <typename Real>
constexpr int kMixedMaxThreads = std::is_same_v<Real, double> ? 256 : 512;

// A row's two buffers (real plane, then imaginary at +stride), swapped after every pass.
template <typename Real>
struct PingPong {
  Real* src;
  Real* dst;
  __device__ __forceinline__ void swap() {
    Real* t = src;
    src = dst;
    dst = t;
  }
};

// `count` passes of radix R, advancing ns (points of the sub-transforms so far) and off (the
// twiddle table's next pass).
template <int R, bool INV, bool PAD, typename Real>
__device__ __forceinline__ void pass_run(PingPong<Real>& buf, int n, int stride, int& ns,
                                         int& off, int tid, int t_row,
                                         const typename Cx<Real>::T* tw, int count) {
  for (int i = 0; i < count; ++i) {
    mixed_pass<R, INV, PAD, Real>(buf.src, buf.dst, n, stride, ns, tid, t_row, tw + off);
    buf.swap();
    if (ns > 1) off += ns * (R - 1);
    ns *= R;
  }
}

// The passes of each radix, 4 bits each in codes in fft_radix_slot's order (a kernel argument:
// a kernel reading a.radix[p] with a run-time p would copy the parameter struct to local memory).
__device__ __forceinline__ int radix_of_slot(int i) {
  return i == 0 ? 7 : i == 1 ? 5 : i == 2 ? 3 : i == 3 ? 8 : i == 4 ? 4 : 2;
}
__device__ __forceinline__ int count_of(std::uint64_t codes, int r) {
  return int(codes >> (4 * fft_radix_slot(r))) & 15;
}

// All passes of a transform in fft.h's order (fft_radix_slot), each radix a loop of one inlined
// pass (one switch over the radix in a single loop made ptxas keep every case's registers
// live); ODD: whether the length may have the odd radices (not Bluestein's powers of two).
template <bool INV, bool ODD, bool PAD, typename Real>
__device__ __forceinline__ void run_passes(PingPong<Real>& buf, int len, int plane,
                                           std::uint64_t codes, int tid, int t_row,
                                           const typename Cx<Real>::T* tw) {
  int off = 0, ns = 1;
  if constexpr (ODD) {
    pass_run<7, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 7));
    pass_run<5, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 5));
    pass_run<3, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 3));
  }
  pass_run<8, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 8));
  pass_run<4, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 4));
  pass_run<2, INV, PAD, Real>(buf, len, plane, ns, off, tid, t_row, tw, count_of(codes, 2));
}

// Shared memory: for each of the block's rows two buffers of its len points (n; Bluestein's M),
// each a real plane and an imaginary plane, rows back to back (row_size).
//
// Bluestein (BLUE): the N-point transform of any N as the circular convolution of z c with the
// chirp's kernel on M points, X[k] = c[k] IFFT_M(FFT_M(z c) bhat)[k] (pygpukit/backends/
// _support/fft.py's chirp_tables; a table for each direction), all in the row's buffers: the
// chirp applied as z loads, M-point forward passes, the product with bhat, inverse passes, the
// chirp again; the loads, untangling and stores as for any N.
template <bool INV, int LOAD, typename Real, typename E, bool BLUE>
__global__ void __launch_bounds__(kMixedMaxThreads<Real>)
    fft_mixed_kernel(const FftArgs a, std::uint64_t codes, int t_row, int rows) {
  using V = typename Cx<Real>::T;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int n = a.points;
  const int lr = threadIdx.x / t_row, tid = threadIdx.x % t_row;
  const std::int64_t r = std::int64_t(blockIdx.x) * rows + lr;
  const bool live = r < a.rows;  // the last block's spare rows only join the barriers
  const V* tw = reinterpret_cast<const V*>(a.twiddles);
  // The passes' points (len) and twiddles; the untangling twiddles follow (passes with ns > 1
  // store ns (R - 1)), then Bluestein's chirp and bhat.
  int untangle = 0, len = 1;
  for (int i = 0; i < 6; ++i) {
    const int rd = radix_of_slot(i);
    for (int c = int(codes >> (4 * i)) & 15; c > 0; --c) {
      if (len > 1) untangle += len * (rd - 1);
      len *= rd;
    }
  }
  const V* wu = tw + untangle;
  const V* chirp = wu + (LOAD == kRealPairs || LOAD == kHermitian ? n + 1 : 0);
  const V* bhat = chirp + n;
  const int plane = plane_size(len, BLUE);
  Real* base = reinterpret_cast<Real*>(smem_raw) + std::int64_t(lr) * row_size(len, t_row, BLUE);
  PingPong<Real> buf{base, base + 2 * plane};
  Row row{0, 0, 0};
  if (live) {
    const std::int64_t i2 = r % a.d2, t = r / a.d2, i1 = t % a.d1, i0 = t / a.d1;
    row.x = i0 * a.sx0 + i1 * a.sx1 + i2 * a.sx2;
    row.y = i0 * a.sy0 + i1 * a.sy1 + i2 * a.sy2;
    row.frame = i2 * a.hop - a.pad;
    for (int e = tid; e < len; e += t_row) {  // coalesced across the row's threads
      V z = mk(Real(0), Real(0));
      if (!BLUE || e < n) z = mixed_z<Real, E, LOAD>(a, row, e, n, wu);
      if (BLUE && e < n) z = cmul(z, __ldg(chirp + e));
      buf.src[sidx<BLUE>(e)] = z.x;
      buf.src[plane + sidx<BLUE>(e)] = z.y;
    }
  }
  __syncthreads();
  if constexpr (BLUE) {
    run_passes<false, false, true, Real>(buf, len, plane, codes, tid, t_row, tw);
    for (int k = tid; k < len; k += t_row) {
      const int i = sidx<true>(k);
      const V v = cmul(mk(buf.src[i], buf.src[plane + i]), __ldg(bhat + k));
      buf.src[i] = v.x;
      buf.src[plane + i] = v.y;
    }
    __syncthreads();
    run_passes<true, false, true, Real>(buf, len, plane, codes, tid, t_row, tw);
    for (int k = tid; k < n; k += t_row) {
      const int i = sidx<true>(k);
      const V v = cmul(mk(buf.src[i], buf.src[plane + i]), __ldg(chirp + k));
      buf.src[i] = v.x;
      buf.src[plane + i] = v.y;
    }
    if constexpr (LOAD == kRealPairs) __syncthreads();  // the untangling reads Z[N - k]
  } else {
    run_passes<INV, true, false, Real>(buf, len, plane, codes, tid, t_row, tw);
  }
  if (!live) return;
  Real* y = reinterpret_cast<Real*>(a.y) + row.y;
  const Real* re = buf.src;  // the result, natural order
  const Real* im = buf.src + plane;
  if constexpr (LOAD == kRealPairs) {
    // X[k] = untangle_x(Z[k], conj(Z[N - k])), k = 0..N.
    for (int k = tid; k <= n; k += t_row) {
      const int ia = sidx<BLUE>(k == n ? 0 : k), ib = sidx<BLUE>(k == 0 ? 0 : n - k);
      const V za = mk(re[ia], im[ia]), zb = mk(re[ib], -im[ib]);
      store_x(a, y, k, untangle_x(za, zb, __ldg(wu + k)));
    }
  } else {
    for (int k = tid; k < n; k += t_row) {
      store_x(a, y, k, mk(re[sidx<BLUE>(k)], im[sidx<BLUE>(k)]));
    }
  }
}

// Dynamic shared memory a block may take: a 4096-point float row (or a 2048-point float64 row)
// needs 64 KiB, 66 KiB as Bluestein's padded planes; 96 KiB is within every targeted
// architecture's limit (sm_86 / sm_89: 99 KiB).
constexpr int kMixedSmemMax = 96 << 10;

// Rows a block for t_row threads a row: the count whose blocks keep the most threads of rows
// busy on an SM (the occupancy calculator's blocks an SM times the block's row threads), the
// fewest rows among equals; a block's threads rarely fill whole warps (Whisper's 400 points:
// 50 threads a row). Cached by (device, t_row, bytes a row) for each kernel, whose shared
// memory limit is raised on the device the first time.
template <bool INV, int LOAD, typename Real, typename E, bool BLUE>
int rows_per_block(int device, int t_row, int row_bytes) {
  static std::mutex lock;
  static std::map<std::tuple<int, int, int>, int> cache;
  const std::lock_guard<std::mutex> hold(lock);
  const auto key = std::make_tuple(device, t_row, row_bytes);
  const auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second;
  const auto kernel = fft_mixed_kernel<INV, LOAD, Real, E, BLUE>;
  PGK_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kMixedSmemMax));
  const int top = std::max(1, std::min(kMixedMaxThreads<Real> / t_row, kMixedSmemMax / row_bytes));
  int best = 1, best_busy = -1;
  for (int rows = 1; rows <= top; ++rows) {
    int blocks = 0;
    PGK_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, rows * t_row,
                                                            std::size_t(rows) * row_bytes));
    const int busy = blocks * rows * t_row;
    if (busy > best_busy) {
      best = rows;
      best_busy = busy;
    }
  }
  cache.emplace(key, best);
  return best;
}

template <bool INV, int LOAD, typename Real, typename E, bool BLUE>
void launch_kernel(const FftArgs& a) {
  int len = 1;  // the passes' points
  std::uint64_t codes = 0;  // fft_rows checked that the radices come in the kernel's order
  for (int p = 0; p < a.npass; ++p) {
    codes += std::uint64_t(1) << (4 * fft_radix_slot(a.radix[p]));
    len *= a.radix[p];
  }
  const int t_row = (len + 7) / 8;
  const int row_bytes = row_size(len, t_row, BLUE) * int(sizeof(Real));
  const int rows = rows_per_block<INV, LOAD, Real, E, BLUE>(a.device, t_row, row_bytes);
  const std::int64_t blocks = (a.rows + rows - 1) / rows;
  PGK_REQUIRE_AS("fft_rows", blocks <= 0x7fffffff,
                 std::to_string(a.rows) + " rows are more than one launch takes");
  fft_mixed_kernel<INV, LOAD, Real, E, BLUE>
      <<<unsigned(blocks), unsigned(rows * t_row), std::size_t(rows) * row_bytes,
         as_stream(a.stream)>>>(a, codes, t_row, rows);
  PGK_CHECK_LAUNCH("fft_rows");
}

template <bool INV, int LOAD, typename Real, typename E>
void launch_mixed(const FftArgs& a) {
  if (a.bluestein) return launch_kernel<INV, LOAD, Real, E, true>(a);
  launch_kernel<INV, LOAD, Real, E, false>(a);
}

// Both precisions of one load kind and direction; the real loads by input dtype.
template <bool INV, int LOAD>
void launch_mixed_any(const FftArgs& a) {
  if (a.f64) return launch_mixed<INV, LOAD, double, double>(a);
  if constexpr (LOAD == kReal || LOAD == kRealPairs) {
    if (a.x_dtype == DType::f16) return launch_mixed<INV, LOAD, float, __half>(a);
    if (a.x_dtype == DType::bf16) return launch_mixed<INV, LOAD, float, __nv_bfloat16>(a);
  }
  launch_mixed<INV, LOAD, float, float>(a);
}

}  // namespace
}  // namespace fftk

void fft_rows_mixed(const FftArgs& a) {
  switch (a.load) {
    case kComplex:
      if (a.inverse) return fftk::launch_mixed_any<true, kComplex>(a);
      return fftk::launch_mixed_any<false, kComplex>(a);
    case kReal:
      if (a.inverse) return fftk::launch_mixed_any<true, kReal>(a);
      return fftk::launch_mixed_any<false, kReal>(a);
    case kRealPairs:
      return fftk::launch_mixed_any<false, kRealPairs>(a);
    default:
      return fftk::launch_mixed_any<true, kHermitian>(a);
  }
}

}  // namespace pgk
