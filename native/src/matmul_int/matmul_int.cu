// Integer GEMM: shared-memory tiles of 64 x 64 outputs per block of 256 threads (4 x 4 outputs
// per thread), K in steps of 16. Operands are widened on load to the unsigned compute type (sign
// extension for signed types: the same bits mod 2^bits), multiplied and summed in unsigned
// arithmetic, whose wraparound is defined (signed overflow is not), and truncated to the result
// type at the store: exactly NumPy's integer matmul, which accumulates in the result type.
// 32-bit arithmetic for types of at most 32 bits (the low 8 / 16 bits of a sum mod 2^32 are the
// sum mod 2^8 / 2^16), 64-bit for int64. Not a tensor-core kernel: integer products are rare in
// this library (indices, counts), and exactness is the point.
#include "matmul_int/matmul_int.h"

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "pygpukit_native/check.h"

namespace pgk {
namespace {

constexpr int kTM = 64, kTN = 64, kTK = 16, kThreads = 256;

template <typename T>
using wide_t = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;

// T -> the unsigned compute type, through the signed type of that width (sign extension).
template <typename T>
__device__ __forceinline__ wide_t<T> widen(T v) {
  using S = std::conditional_t<sizeof(T) == 8, long long, int>;
  return static_cast<wide_t<T>>(static_cast<S>(v));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    matmul_int_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ d,
                      std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      std::int64_t sab, std::int64_t sam, std::int64_t sak, std::int64_t sbb,
                      std::int64_t sbk, std::int64_t sbn, std::int64_t tiles_n) {
  using U = wide_t<T>;
  __shared__ U as[kTK][kTM];
  __shared__ U bs[kTK][kTN];
  const int t = threadIdx.x;
  const int tx = t % 16, ty = t / 16;
  // 32-bit tile arithmetic (the launcher keeps the tile count within INT_MAX).
  const int tile = blockIdx.x, tn = static_cast<int>(tiles_n);
  const std::int64_t m0 = static_cast<std::int64_t>(tile / tn) * kTM;
  const std::int64_t n0 = static_cast<std::int64_t>(tile % tn) * kTN;
  for (std::int64_t z = blockIdx.y; z < batch; z += gridDim.y) {
    const T* az = a + z * sab;
    const T* bz = b + z * sbb;
    U acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0;
    for (std::int64_t k0 = 0; k0 < k; k0 += kTK) {
      // a tile [64 rows, 16 k]: consecutive threads take consecutive k (row-major a coalesces).
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = t + kThreads * i;
        const int r = e / kTK, c = e % kTK;
        const std::int64_t gm = m0 + r, gk = k0 + c;
        as[c][r] = (gm < m && gk < k) ? widen(az[gm * sam + gk * sak]) : U(0);
      }
      // b tile [16 k, 64 cols]: consecutive threads take consecutive columns.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = t + kThreads * i;
        const int r = e / kTN, c = e % kTN;
        const std::int64_t gk = k0 + r, gn = n0 + c;
        bs[r][c] = (gk < k && gn < n) ? widen(bz[gk * sbk + gn * sbn]) : U(0);
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTK; ++kk) {
        U av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
    T* dz = d + z * m * n;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::int64_t gm = m0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const std::int64_t gn = n0 + tx + 16 * j;
        // Unsigned -> narrower / signed: the low bits (modulo, as NumPy's wraparound).
        if (gm < m && gn < n) dz[gm * n + gn] = static_cast<T>(acc[i][j]);
      }
    }
  }
}

template <typename F>
void dispatch_int(DType dt, F&& f) {
  switch (dt) {
    case DType::i64: return f(std::int64_t{});
    case DType::i32: return f(std::int32_t{});
    case DType::i16: return f(std::int16_t{});
    case DType::i8: return f(std::int8_t{});
    case DType::u8: return f(std::uint8_t{});
    default:
      fail("matmul_int", std::string("unsupported dtype ") + dtype_name(dt) +
                             " (int64, int32, int16, int8, uint8)");
  }
}

}  // namespace

void matmul_int(const MatmulIntArgs& a) {
  PGK_REQUIRE(a.batch >= 1 && a.m >= 1 && a.n >= 1 && a.k >= 1,
              "batch, m, n and k must be >= 1 (empty products are handled in Python)");
  const std::int64_t tiles_n = (a.n + kTN - 1) / kTN;
  const std::int64_t tiles = ((a.m + kTM - 1) / kTM) * tiles_n;
  PGK_REQUIRE(tiles <= INT_MAX, "the product has too many 64 x 64 tiles for one launch");
  const dim3 grid(static_cast<unsigned>(tiles),
                  static_cast<unsigned>(std::min<std::int64_t>(a.batch, 65535)));
  const cudaStream_t st = as_stream(a.stream);
  dispatch_int(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    use_device(a.device);  // after the dtype check: bad arguments never touch the driver
    matmul_int_kernel<T><<<grid, kThreads, 0, st>>>(
        ptr<const T>(a.a), ptr<const T>(a.b), ptr<T>(a.d), a.batch, a.m, a.n, a.k,
        a.a_batch_stride, a.sam, a.sak, a.b_batch_stride, a.sbk, a.sbn, tiles_n);
    PGK_CHECK_LAUNCH("matmul_int_kernel");
  });
}

}  // namespace pgk
