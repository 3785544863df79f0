// RoPE kernel: one block per token. Threads are tx chunks of P rotary pairs times ty heads; each
// thread loads the cos/sin entries of its chunk once (the token's table row is shared by all its
// heads) and rotates that chunk in every head it covers. neox reads the chunk's P elements of
// each half (two 16-byte packs when aligned), gptj its 2P interleaved elements (one pack) and
// pairs them up in registers. The x loads do not depend on the position, so they are issued
// before the position -> cos/sin chain resolves. With a partial rotary_dim the remaining dims
// are copied by the whole block (packs when aligned), unless y is x. The rotation itself is
// rotate.cuh's (no FMA contraction: the same bits as kv_cache_write's fused RoPE and NumPy).
#include "rope/rope.h"

#include <climits>
#include <cmath>

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/rotate.cuh"
#include "pygpukit_native/vecio.cuh"

namespace pgk {
namespace {

struct RopeParams {
  const void* x;
  void* y;
  const void* pos;
  const void* cos;
  const void* sin;
  std::int64_t s, heads, d, half, max_pos;
  std::int64_t sxb, sxs, sxh, syb, sys, syh, spb, sps, scr, scc, ssr, ssc;
  bool pos64, tab_vec, copy_tail, tail_vec;
};

template <int N, bool VEC, typename T>
__device__ __forceinline__ Pack<T, N> load_n(const T* p, std::int64_t stride) {
  if constexpr (VEC) {
    return load_pack<N>(p);
  } else {
    Pack<T, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = p[k * stride];
    return r;
  }
}

template <int N, bool VEC, typename T>
__device__ __forceinline__ void store_n(T* p, const Pack<T, N>& v) {
  if constexpr (VEC) {
    store_pack<N>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = v.v[k];
  }
}

// T: x/y, W: tables, P: pairs per thread chunk (P > 1: every x/y access is an aligned pack).
template <typename T, typename W, bool GPTJ, int P>
__global__ void __launch_bounds__(256) rope_kernel(const RopeParams p) {
  using C = typename Compute<T>::type;
  constexpr bool VEC = P > 1;
  constexpr int NX = GPTJ ? 2 * P : P;  // x elements per load
  const std::int64_t t = blockIdx.x;
  const std::int64_t b = t / p.s, si = t - b * p.s;
  const T* xt = static_cast<const T*>(p.x) + b * p.sxb + si * p.sxs;
  T* yt = static_cast<T*>(p.y) + b * p.syb + si * p.sys;
  std::int64_t pos = si;
  if (p.pos) {
    const std::int64_t off = b * p.spb + si * p.sps;
    pos = p.pos64 ? static_cast<const std::int64_t*>(p.pos)[off]
                  : std::int64_t(static_cast<const std::int32_t*>(p.pos)[off]);
  }
  const bool valid = pos >= 0 && pos < p.max_pos;
  if (!valid) pos = 0;
  const std::int64_t chunks = p.half / P;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const std::int64_t i0 = c * P;
    // The first head's x, loaded before the position-dependent table reads.
    std::int64_t h = threadIdx.y;
    Pack<T, NX> va, vb;
    if (h < p.heads) {
      const T* xh = xt + h * p.sxh;
      va = load_n<NX, VEC>(xh + (GPTJ ? 2 * i0 : i0), 1);
      if constexpr (!GPTJ) vb = load_n<NX, VEC>(xh + p.half + i0, 1);
    }
    C cs[P], sn[P];
    const W* cr = static_cast<const W*>(p.cos) + pos * p.scr;
    const W* sr = static_cast<const W*>(p.sin) + pos * p.ssr;
    if (VEC && p.tab_vec) {
      const Pack<W, P> pc = load_n<P, true>(cr + i0, 1), ps = load_n<P, true>(sr + i0, 1);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        cs[k] = as_compute<C>(pc.v[k]);
        sn[k] = as_compute<C>(ps.v[k]);
      }
    } else {
      const Pack<W, P> pc = load_n<P, false>(cr + i0 * p.scc, p.scc);
      const Pack<W, P> ps = load_n<P, false>(sr + i0 * p.ssc, p.ssc);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        cs[k] = as_compute<C>(pc.v[k]);
        sn[k] = as_compute<C>(ps.v[k]);
      }
    }
    if (!valid) {
#pragma unroll
      for (int k = 0; k < P; ++k) cs[k] = sn[k] = C(NAN);
    }
    for (; h < p.heads; h += blockDim.y) {
      if (h != std::int64_t(threadIdx.y)) {
        const T* xh = xt + h * p.sxh;
        va = load_n<NX, VEC>(xh + (GPTJ ? 2 * i0 : i0), 1);
        if constexpr (!GPTJ) vb = load_n<NX, VEC>(xh + p.half + i0, 1);
      }
      T* yh = yt + h * p.syh;
      if constexpr (GPTJ) {
        Pack<T, NX> o;
#pragma unroll
        for (int k = 0; k < P; ++k) {
          const C a = as_compute<C>(va.v[2 * k]), bb = as_compute<C>(va.v[2 * k + 1]);
          o.v[2 * k] = as_stored<T>(rotate_first(a, bb, cs[k], sn[k]));
          o.v[2 * k + 1] = as_stored<T>(rotate_second(a, bb, cs[k], sn[k]));
        }
        store_n<NX, VEC>(yh + 2 * i0, o);
      } else {
        Pack<T, NX> oa, ob;
#pragma unroll
        for (int k = 0; k < P; ++k) {
          const C a = as_compute<C>(va.v[k]), bb = as_compute<C>(vb.v[k]);
          oa.v[k] = as_stored<T>(rotate_first(a, bb, cs[k], sn[k]));
          ob.v[k] = as_stored<T>(rotate_second(a, bb, cs[k], sn[k]));
        }
        store_n<NX, VEC>(yh + i0, oa);
        store_n<NX, VEC>(yh + p.half + i0, ob);
      }
    }
  }
  if (p.copy_tail) {
    const std::int64_t r = 2 * p.half, tail = p.d - r;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nth = blockDim.x * blockDim.y;
    constexpr int V = vec16<T>();
    if (VEC && p.tail_vec) {
      const std::int64_t per = tail / V;
      for (std::int64_t i = tid; i < p.heads * per; i += nth) {
        const std::int64_t h = i / per, j = r + (i - h * per) * V;
        store_pack<V>(yt + h * p.syh + j, load_pack<V>(xt + h * p.sxh + j));
      }
    } else {
      for (std::int64_t i = tid; i < p.heads * tail; i += nth) {
        const std::int64_t h = i / tail, j = r + (i - h * tail);
        yt[h * p.syh + j] = xt[h * p.sxh + j];
      }
    }
  }
}

template <typename T, typename W>
void launch(const RopeArgs& a) {
  constexpr int V = vec16<T>();
  constexpr int PV = V / 2;  // gptj: V elements = V/2 pairs; neox uses V pairs (two packs)
  const int pmax = a.gptj ? PV : V;
  bool vec = aligned_to(a.x, 16) && aligned_to(a.y, 16) && a.half % pmax == 0;
  for (std::int64_t st : {a.sxb, a.sxs, a.sxh, a.syb, a.sys, a.syh}) vec = vec && st % V == 0;
  const int P = vec ? pmax : 1;
  RopeParams p{};
  p.x = ptr<const void>(a.x);
  p.y = ptr<void>(a.y);
  p.pos = ptr<const void>(a.pos);
  p.cos = ptr<const void>(a.cos);
  p.sin = ptr<const void>(a.sin);
  p.s = a.s;
  p.heads = a.heads;
  p.d = a.d;
  p.half = a.half;
  p.max_pos = a.max_pos;
  p.sxb = a.sxb;
  p.sxs = a.sxs;
  p.sxh = a.sxh;
  p.syb = a.syb;
  p.sys = a.sys;
  p.syh = a.syh;
  p.spb = a.spb;
  p.sps = a.sps;
  p.scr = a.scr;
  p.scc = a.scc;
  p.ssr = a.ssr;
  p.ssc = a.ssc;
  p.pos64 = a.pos_dtype == DType::i64;
  const std::size_t tab_bytes = std::size_t(P) * sizeof(W);
  p.tab_vec = a.scc == 1 && a.ssc == 1 && a.scr % P == 0 && a.ssr % P == 0 &&
              aligned_to(a.cos, tab_bytes) && aligned_to(a.sin, tab_bytes);
  p.copy_tail = a.copy_tail && a.d > 2 * a.half;
  p.tail_vec = vec && (2 * a.half) % V == 0 && (a.d - 2 * a.half) % V == 0;
  const std::int64_t chunks = a.half / P;
  const int tx = int(chunks < 256 ? chunks : 256);
  std::int64_t ty = 256 / tx;
  if (ty > a.heads) ty = a.heads;
  const dim3 block(unsigned(tx), unsigned(ty < 1 ? 1 : ty));
  const cudaStream_t stream = as_stream(a.stream);
  const unsigned grid = unsigned(a.tokens);
  if (a.gptj) {
    if (vec) {
      rope_kernel<T, W, true, PV><<<grid, block, 0, stream>>>(p);
    } else {
      rope_kernel<T, W, true, 1><<<grid, block, 0, stream>>>(p);
    }
  } else if (vec) {
    rope_kernel<T, W, false, V><<<grid, block, 0, stream>>>(p);
  } else {
    rope_kernel<T, W, false, 1><<<grid, block, 0, stream>>>(p);
  }
  PGK_CHECK_LAUNCH("rope_kernel");
}

}  // namespace

void rope(const RopeArgs& a) {
  PGK_REQUIRE(a.tokens >= 0 && a.heads >= 0 && a.d >= 0, "sizes must be >= 0");
  if (a.tokens == 0 || a.heads == 0 || a.d == 0) return;
  PGK_REQUIRE(a.tokens <= INT_MAX, "more than 2^31-1 tokens");
  PGK_REQUIRE(a.s > 0 && a.tokens % a.s == 0, "tokens must be a multiple of s");
  PGK_REQUIRE(a.half > 0 && 2 * a.half <= a.d, "rotary pairs must fit in d");
  PGK_REQUIRE(a.x && a.y && a.cos && a.sin, "x, y, cos and sin must be device pointers");
  PGK_REQUIRE(!a.pos || a.pos_dtype == DType::i32 || a.pos_dtype == DType::i64,
              "positions must be int32 or int64");
  use_device(a.device);
  dispatch_float(a.dtype, "rope", [&](auto t) {
    using T = decltype(t);
    if (a.table_dtype == a.dtype) {
      launch<T, T>(a);
    } else if (a.table_dtype == DType::f32) {
      if constexpr (!std::is_same<T, float>::value) launch<T, float>(a);
    } else {
      fail("rope", std::string("tables must be float32 or x's dtype, got ") +
                       dtype_name(a.table_dtype));
    }
  });
}

}  // namespace pgk
