// The elementwise "map" engine shared by the elementwise, unary and copy families (and usable by
// any other): out[idx] = convert<Out>(f(c0, c1, c2)) where ck is input k converted to the compute
// type C (or its scalar value). One kernel per (F, C, In0, In, Out) with two paths, picked per
// launch:
// - flat: every array operand (and the output) contiguous over the whole index space. A
//   grid-stride loop over 16-byte packs (vector loads/stores) when every pointer is aligned to
//   its pack, then a scalar tail; unaligned pointers take the scalar loop (still coalesced).
// - N-d: any strides (broadcast stride 0, transposed or stepped views, a strided out=). The
//   innermost collapsed dim is the column axis of a tile of tc threads x ilp columns by
//   256 / tc rows; a thread decomposes its row index over the outer dims once (div/mod in
//   64 bits, none for 2-D) and then steps along its columns with one multiply-add per operand.
//   Offsets are int64: arrays may exceed 2**31 elements.
// Input 0 has its own storage type In0 (where's bool condition); inputs 1 and 2 share In.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "pygpukit_native/check.h"
#include "pygpukit_native/map_args.h"
#include "pygpukit_native/numeric.cuh"

namespace pgk {
namespace map_detail {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Elements per pack: 16 bytes of the widest operand, at most 8 (1-byte types then move 8 bytes
// per access; more would unroll the functor 16 times for little gain and much compile time).
template <typename In0, typename In, typename Out>
constexpr int vec_width() {
  constexpr std::size_t m = std::max({sizeof(In0), sizeof(In), sizeof(Out)});
  return static_cast<int>(m >= 16 ? 1 : (16 / m > 8 ? 8 : 16 / m));
}

template <typename C>
__device__ __forceinline__ C scalar_as(const MapScalar& s) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    return convert<C>(s.f);
  } else if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(static_cast<std::make_unsigned_t<C>>(s.i));  // wraps, as Triton
  } else {
    return C{};  // raw storage compute types (copy/cast) take no scalars
  }
}

template <typename C, typename T>
__device__ __forceinline__ C load(const T* p, std::int64_t off, C scalar) {
  return p ? convert<C>(p[off]) : scalar;
}

template <typename F, typename C, typename In0, typename In, typename Out>
__global__ void __launch_bounds__(kThreads) map_kernel(MapArgs a, F f) {
  Out* y = reinterpret_cast<Out*>(a.ptr[0]);
  const In0* x0 = reinterpret_cast<const In0*>(a.ptr[1]);
  const In* x1 = reinterpret_cast<const In*>(a.ptr[2]);
  const In* x2 = reinterpret_cast<const In*>(a.ptr[3]);
  const C s0 = scalar_as<C>(a.scalar[1]);
  const C s1 = scalar_as<C>(a.scalar[2]);
  const C s2 = scalar_as<C>(a.scalar[3]);
  const std::int64_t n = a.n;
  if (a.flat) {
    const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    std::int64_t done = 0;
    if (a.vec) {
      constexpr int V = vec_width<In0, In, Out>();
      const std::int64_t nv = n / V;
      for (std::int64_t v = tid; v < nv; v += step) {
        const std::int64_t base = v * V;
        Pack<In0, V> p0;
        Pack<In, V> p1, p2;
        if (x0) p0 = *reinterpret_cast<const Pack<In0, V>*>(x0 + base);
        if (x1) p1 = *reinterpret_cast<const Pack<In, V>*>(x1 + base);
        if (x2) p2 = *reinterpret_cast<const Pack<In, V>*>(x2 + base);
        Pack<Out, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          o.v[j] = convert<Out>(f(x0 ? convert<C>(p0.v[j]) : s0, x1 ? convert<C>(p1.v[j]) : s1,
                                  x2 ? convert<C>(p2.v[j]) : s2));
        }
        *reinterpret_cast<Pack<Out, V>*>(y + base) = o;
      }
      done = nv * V;
    }
    for (std::int64_t i = done + tid; i < n; i += step) {
      y[i] = convert<Out>(f(load(x0, i, s0), load(x1, i, s1), load(x2, i, s2)));
    }
    return;
  }
  constexpr int L = kMapDims - 1;  // the innermost (column) dim
  const std::int64_t inner = a.size[L];
  const std::int64_t rows = n / inner;
  const int tc = a.tc;
  const int tx = threadIdx.x & (tc - 1);
  const int ty = threadIdx.x / tc;
  const int tr = kThreads / tc;
  const int first = kMapDims - a.nd;  // the outermost collapsed dim
  for (std::int64_t t = blockIdx.x; t < a.tiles; t += gridDim.x) {
    const std::int64_t rt = t / a.n_ct;
    const std::int64_t row = rt * tr + ty;
    if (row >= rows) continue;
    std::int64_t o0 = 0, o1 = 0, o2 = 0, o3 = 0;
    std::int64_t r = row;
#pragma unroll
    for (int d = L - 1; d >= 0; --d) {
      if (d > first) {
        const std::int64_t q = r / a.size[d];
        const std::int64_t i = r - q * a.size[d];
        r = q;
        o0 += i * a.stride[0][d];
        o1 += i * a.stride[1][d];
        o2 += i * a.stride[2][d];
        o3 += i * a.stride[3][d];
      } else if (d == first) {
        o0 += r * a.stride[0][d];
        o1 += r * a.stride[1][d];
        o2 += r * a.stride[2][d];
        o3 += r * a.stride[3][d];
      }
    }
    const std::int64_t c0 = (t - rt * a.n_ct) * tc * a.ilp + tx;
    for (int j = 0; j < a.ilp; ++j) {
      const std::int64_t c = c0 + static_cast<std::int64_t>(j) * tc;
      if (c >= inner) break;
      y[o0 + c * a.stride[0][L]] = convert<Out>(f(load(x0, o1 + c * a.stride[1][L], s0),
                                                   load(x1, o2 + c * a.stride[2][L], s1),
                                                   load(x2, o3 + c * a.stride[3][L], s2)));
    }
  }
}

inline std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

template <typename T>
inline bool aligned(std::uintptr_t p, int v) {
  return p % (sizeof(T) * static_cast<std::size_t>(v)) == 0;
}

}  // namespace map_detail

// Launch f over a on its stream (a.n == 0 launches nothing).
template <typename F, typename C, typename In0, typename In, typename Out>
void launch_map(MapArgs a, F f, const char* name) {
  using namespace map_detail;
  if (a.n == 0) return;
  use_device(a.device);
  constexpr int L = kMapDims - 1;
  a.flat = a.nd == 1;
  for (int k = 0; k < kMapOperands; ++k) {
    if (a.ptr[k] && a.stride[k][L] != 1) a.flat = 0;
  }
  std::int64_t blocks;
  if (a.flat) {
    constexpr int V = vec_width<In0, In, Out>();
    a.vec = aligned<Out>(a.ptr[0], V) && aligned<In0>(a.ptr[1], V) && aligned<In>(a.ptr[2], V) &&
            aligned<In>(a.ptr[3], V);
    const std::int64_t per_block = static_cast<std::int64_t>(kThreads) * (a.vec ? V : 1);
    blocks = (a.n + per_block - 1) / per_block;
  } else {
    const std::int64_t inner = a.size[L];
    const std::int64_t rows = a.n / inner;
    a.tc = static_cast<int>(std::min<std::int64_t>(kThreads, next_pow2(inner)));
    const std::int64_t tr = kThreads / a.tc;
    a.ilp = static_cast<int>(std::min<std::int64_t>(4, (inner + a.tc - 1) / a.tc));
    const std::int64_t cols = static_cast<std::int64_t>(a.tc) * a.ilp;
    a.n_ct = (inner + cols - 1) / cols;
    a.tiles = a.n_ct * ((rows + tr - 1) / tr);
    blocks = a.tiles;
  }
  blocks = std::max<std::int64_t>(1, std::min(blocks, kMaxBlocks));
  map_kernel<F, C, In0, In, Out>
      <<<static_cast<unsigned>(blocks), kThreads, 0, as_stream(a.stream)>>>(a, f);
  PGK_CHECK_LAUNCH(name);
}

}  // namespace pgk
