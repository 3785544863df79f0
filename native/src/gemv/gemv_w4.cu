// W4A16 GEMV: y[M, N] = x[M, K] @ dequant(W)^T + bias, x and y bfloat16 or float16, W packed
// two 4-bit values a byte along K, the LOW nibble holding the EVEN k (pygpukit's int4 layout):
// byte j of row n = (W[n, 2j] & 0xF) | (W[n, 2j+1] << 4). Rows 16-byte aligned, row stride a
// multiple of 16 bytes, K % 32 == 0. x, y, bias as in gemv_bf16.cu.
//
// int4:  values two's complement in [-8, 7]; scales s [N, ceil(K/128)] (float32, bfloat16 or
//        float16, row-major; a last partial group is allowed): dequant(W)[n, k] =
//        s[n, k / 128] * W[n, k]. No zero point.
// nvfp4: values fp4 e2m1 codes (bit 3 sign, bits 2..1 exponent with bias 1, bit 0 mantissa:
//        0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives); scales float8_e4m3fn [N, K/16]
//        (row stride even); dequant(W)[n, k] = global * s[n, k / 16] * e2m1(W[n, k]).
//
// Granule: 32 values (16 bytes); word i (values 8i..8i+7) feeds two mma: the dequantizers
// produce pairs (8i+j, 8i+j+4), so x is regrouped the same way with byte permutes (pairs04).
//
// Numerics: int4 values are exact in bf16/f16; the fp32 partial sum of each warp-step (128
// values of K = one scale group) is multiplied by its group scale before it joins the
// accumulator. nvfp4: e2m1 value * e4m3 block scale is exact in bf16 and f16 (at most 6
// significant bits, magnitudes in [2^-10, 2688]), so the tensor cores multiply exact dequantized
// weights except the fp32 global scale, applied once per column at the end. Error bound against
// the float64 product x @ dequant(W)^T (checked by tests/native/test_native_gemv.py):
//   |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (sum_k |x_k dequant(W)_k| + |bias|)
// with u = 2^-8 (bfloat16) or 2^-11 (float16).
#include "gemv/gemv_kernel.cuh"

namespace pgk {
namespace gemv_detail {
namespace {

// x pairs of one word (8 values of K) for rows g and g + 8.
template <typename T>
__device__ __forceinline__ void x_pairs(const Ctx<T>& c, std::int64_t k, bool ok,
                                        std::uint32_t (&a)[4], std::uint32_t (&b)[4]) {
  pairs04(ld_x(c.xa, k, ok), a);
  pairs04(ld_x(c.xb, k, ok), b);
}

// Group scales of one warp-step (its 128 values of K are scale group `step`) for the thread's
// C columns 2t and 2t + 1 of each n-tile, in fp32. Loaded a super-step ahead (load_super).
template <typename S>
struct Int4Side {
  float s[kTiles][2];

  template <typename T>
  __device__ void load(const Params& p, const Ctx<T>& c, std::int64_t step) {
    const S* sc = static_cast<const S*>(p.scales);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::int64_t n = c.n0 + 8 * j + 2 * c.t + e;
        s[j][e] = n < p.n && step < c.steps ? to_compute(sc[n * p.ss + step]) : 0.f;
      }
    }
  }
};

template <typename S>
struct Int4 {
  static constexpr int kElems = 32;
  static constexpr int kUnroll = 2;
  using Side = Int4Side<S>;

  template <typename T>
  __device__ static void step(const Params& p, const Ctx<T>& c, const uint4 (&w)[kTiles],
                              const Side& side, float (&acc)[kTiles][4], std::int64_t step) {
    (void)p;
    const std::int64_t gi = step * 4 + c.t;
    const bool ok = gi < c.granules;
    float part[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) part[j][e] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      std::uint32_t a[4], b[4];
      x_pairs(c, gi * kElems + 8 * i, ok, a, b);
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        std::uint32_t v[4];
        int4x8<T>(word(w[j], i), v);
        Ops<T>::mma(part[j], a[0], b[0], a[1], b[1], v[0], v[1]);
        Ops<T>::mma(part[j], a[2], b[2], a[3], b[3], v[2], v[3]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        acc[j][e] = fmaf(part[j][e], side.s[j][e], acc[j][e]);
        acc[j][e + 2] = fmaf(part[j][e + 2], side.s[j][e], acc[j][e + 2]);
      }
    }
  }

  __device__ static float finish(const Params&, float v, std::int64_t) { return v; }
};

// The e4m3 scales of blocks 2 gi and 2 gi + 1 (16 values each) of the thread's own W rows, one
// 2-byte load a row, a super-step ahead (load_super).
struct Nvfp4Side {
  std::uint32_t pair[kTiles];

  template <typename T>
  __device__ void load(const Params& p, const Ctx<T>& c, std::int64_t step) {
    const std::int64_t gi = step * 4 + c.t;
    const unsigned char* sc = static_cast<const unsigned char*>(p.scales);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const std::int64_t n = c.n0 + 8 * j + c.g;
      pair[j] = 0;
      if (gi < c.granules && n < p.n) {
        pair[j] = __ldg(reinterpret_cast<const unsigned short*>(sc + n * p.ss + 2 * gi));
      }
    }
  }
};

struct Nvfp4 {
  static constexpr int kElems = 32;
  static constexpr int kUnroll = 2;
  using Side = Nvfp4Side;

  template <typename T>
  __device__ static void step(const Params& p, const Ctx<T>& c, const uint4 (&w)[kTiles],
                              const Side& side, float (&acc)[kTiles][4], std::int64_t step) {
    (void)p;
    const std::int64_t gi = step * 4 + c.t;
    const bool ok = gi < c.granules;
    std::uint32_t s2[kTiles][2];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      s2[j][0] = Ops<T>::e4m3_bcast(side.pair[j] & 0xFFu);
      s2[j][1] = Ops<T>::e4m3_bcast(side.pair[j] >> 8);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      std::uint32_t a[4], b[4];
      x_pairs(c, gi * kElems + 8 * i, ok, a, b);
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        std::uint32_t v[4];
        e2m1x8<T>(word(w[j], i), s2[j][i >> 1], v);
        Ops<T>::mma(acc[j], a[0], b[0], a[1], b[1], v[0], v[1]);
        Ops<T>::mma(acc[j], a[2], b[2], a[3], b[3], v[2], v[3]);
      }
    }
  }

  __device__ static float finish(const Params& p, float v, std::int64_t) { return v * p.gscale; }
};

}  // namespace
}  // namespace gemv_detail

void gemv_int4(const GemvArgs& a) {
  gemv_detail::check_common(a, 32, "gemv_int4");
  PGK_REQUIRE(a.sdtype == DType::f32 || a.sdtype == DType::bf16 || a.sdtype == DType::f16,
              "int4 scales must be float32, bfloat16 or float16");
  PGK_REQUIRE(a.block == 128, "int4 scales are per group of 128 along K");
  PGK_REQUIRE(a.n == 0 || a.scales != 0, "int4 weights need scales");
  PGK_REQUIRE(a.s_row_stride >= (a.k + 127) / 128, "int4 scales need ceil(k / 128) per row");
  gemv_detail::dispatch_half(a.dtype, [&](auto t) {
    using T = decltype(t);
    if (a.sdtype == DType::f32) {
      gemv_detail::launch<T, gemv_detail::Int4<float>>(a, "gemv_int4_kernel");
    } else if (a.sdtype == DType::bf16) {
      gemv_detail::launch<T, gemv_detail::Int4<__nv_bfloat16>>(a, "gemv_int4_kernel");
    } else {
      gemv_detail::launch<T, gemv_detail::Int4<__half>>(a, "gemv_int4_kernel");
    }
  });
}

void gemv_nvfp4(const GemvArgs& a) {
  gemv_detail::check_common(a, 32, "gemv_nvfp4");
  PGK_REQUIRE(a.sdtype == DType::e4m3, "nvfp4 scales must be float8_e4m3fn");
  PGK_REQUIRE(a.block == 16, "nvfp4 scales are per block of 16 along K");
  PGK_REQUIRE(a.n == 0 || a.scales != 0, "nvfp4 weights need scales");
  PGK_REQUIRE(a.s_row_stride >= a.k / 16 && a.s_row_stride % 2 == 0 && a.scales % 2 == 0,
              "nvfp4 scales need k / 16 per row, an even row stride and a 2-byte aligned start");
  gemv_detail::dispatch_half(a.dtype, [&](auto t) {
    using T = decltype(t);
    gemv_detail::launch<T, gemv_detail::Nvfp4>(a, "gemv_nvfp4_kernel");
  });
}

}  // namespace pgk
