// The row-wise elementwise engine of the activation and bias_add twins: y[r, j] = F(a[r, j],
// b[r, j]) over `rows` rows of n elements, every operand's last dim contiguous and its rows
// one stride apart (a contiguous array is one row of all its elements; a bias is b with row
// stride 0). This is the layout of the common cases read in place: contiguous tensors, the
// gate/up halves of a fused projection, a row-strided out=.
//
// Threads: a block of 256 is tx threads along a row times ty rows (tx = 256 for long rows, so
// short rows still fill the block); each thread moves two packs per operand, 16 bytes each when
// every pointer is aligned and every row stride is a whole number of packs, else single
// elements. Both packs of every operand are loaded before any math, so four to six 16-byte loads
// are in flight per thread. The last partial pack of a row is done element by element.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "pygpukit_native/check.h"
#include "pygpukit_native/vecio.cuh"

namespace pgk {

struct RowMap {
  std::int64_t rows, n;
  std::uintptr_t a;
  std::int64_t sa;
  std::uintptr_t b;  // second operand (0 for unary ops); row stride 0 broadcasts one row
  std::int64_t sb;
  std::uintptr_t y;
  std::int64_t sy;
};

constexpr int kMapThreads = 256;
constexpr int kMapUnroll = 2;

struct RowLaunch {
  dim3 block;
  unsigned blocks;
  std::int64_t col_blocks;
};

// tx threads per row (a power of two covering the row's packs `unroll` at a time, at most
// `threads`), ty = threads / tx rows per block (no more than there are rows). `who`: the op, for
// the error.
inline RowLaunch row_launch(std::int64_t rows, std::int64_t n, int v, int unroll, int threads,
                            const char* who) {
  const std::int64_t nvec = ceil_div(n, v);
  int tx = pow2_at_least(ceil_div(nvec, unroll));
  if (tx > threads) tx = threads;
  int ty = threads / tx;
  while (ty > 1 && ty / 2 >= rows) ty >>= 1;
  const std::int64_t col_blocks = ceil_div(nvec, std::int64_t(tx) * unroll);
  const std::int64_t blocks = ceil_div(rows, ty) * col_blocks;
  PGK_REQUIRE_AS(who, blocks <= INT_MAX, "more than 2^31-1 blocks");
  return {dim3(unsigned(tx), unsigned(ty)), unsigned(blocks), col_blocks};
}

// (256, 4): at most 64 registers a thread. Unbounded, ptxas gave sigmoid bf16 48 registers
// and still spilled; the kernels need 20-64.
template <class F, typename C, typename TA, typename TB, typename TY, int V>
__global__ void __launch_bounds__(kMapThreads, 4)
    rowmap_kernel(const TA* a, std::int64_t sa, const TB* b, std::int64_t sb, TY* y,
                  std::int64_t sy, std::int64_t rows, std::int64_t n, std::int64_t col_blocks) {
  // No __restrict__: y may be a (in-place bias_add, out=x); each element is read before it is
  // written, by the same thread.
  const std::int64_t rb = blockIdx.x / col_blocks;
  const std::int64_t cb = blockIdx.x - rb * col_blocks;
  const std::int64_t row = rb * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const TA* ar = a + row * sa;
  const TB* br = b + row * sb;
  TY* yr = y + row * sy;
  const std::int64_t step = std::int64_t(blockDim.x) * V;
  const std::int64_t j0 = cb * kMapUnroll * step + std::int64_t(threadIdx.x) * V;
  Pack<TA, V> pa[kMapUnroll];
  Pack<TB, V> pb[F::kArity == 2 ? kMapUnroll : 1];  // unused by unary ops
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const std::int64_t j = j0 + u * step;
    if (j + V <= n) {
      pa[u] = load_pack<V>(ar + j);
      if constexpr (F::kArity == 2) pb[u] = load_pack<V>(br + j);
    }
  }
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const std::int64_t j = j0 + u * step;
    if (j + V <= n) {
      Pack<TY, V> o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        C bv = C(0);
        if constexpr (F::kArity == 2) bv = as_compute<C>(pb[u].v[k]);
        o.v[k] = as_stored<TY>(F::apply(as_compute<C>(pa[u].v[k]), bv));
      }
      store_pack<V>(yr + j, o);
    } else {
      for (std::int64_t k = j; k < n && k < j + V; ++k) {
        C bv = C(0);
        if constexpr (F::kArity == 2) bv = as_compute<C>(br[k]);
        yr[k] = as_stored<TY>(F::apply(as_compute<C>(ar[k]), bv));
      }
    }
  }
}

// Launch F over m with 16-byte packs (of TY's width) when the layout allows, else elementwise.
template <class F, typename C, typename TA, typename TB, typename TY>
void launch_rowmap(const RowMap& m, cudaStream_t stream, const char* name) {
  constexpr int V = vec16<TY>();
  const bool two = F::kArity == 2;
  const bool vec = V > 1 && aligned_to(m.a, V * sizeof(TA)) && aligned_to(m.y, V * sizeof(TY)) &&
                   stride_ok(m.rows, m.sa, V) && stride_ok(m.rows, m.sy, V) &&
                   (!two || (aligned_to(m.b, V * sizeof(TB)) && stride_ok(m.rows, m.sb, V)));
  auto go = [&](auto width) {
    constexpr int W = decltype(width)::value;
    const RowLaunch L = row_launch(m.rows, m.n, W, kMapUnroll, kMapThreads, name);
    rowmap_kernel<F, C, TA, TB, TY, W><<<L.blocks, L.block, 0, stream>>>(
        ptr<const TA>(m.a), m.sa, ptr<const TB>(m.b), m.sb, ptr<TY>(m.y), m.sy, m.rows, m.n,
        L.col_blocks);
  };
  if (vec) {
    go(std::integral_constant<int, V>{});
  } else {
    go(std::integral_constant<int, 1>{});
  }
  PGK_CHECK_LAUNCH(name);
}

inline void check_rowmap(const RowMap& m, bool binary, const char* who) {
  PGK_REQUIRE_AS(who, m.rows >= 0 && m.n >= 0, "rows and n must be >= 0");
  PGK_REQUIRE_AS(who, m.a && m.y, "a and y must be device pointers");
  PGK_REQUIRE_AS(who, !binary || m.b, "a binary op needs its second operand");
  PGK_REQUIRE_AS(who, m.sa >= 0 && m.sb >= 0 && m.sy >= 0, "row strides must be >= 0");
}

}  // namespace pgk
