// W8A16 GEMV: y[M, N] = x[M, K] @ (s * W)^T + bias with W float8_e4m3fn [N, K] and float32
// scales s, x and y bfloat16 or float16.
//
// Layout: W row-major [N, K] (one byte a value, row n = output column n, 16-byte aligned, row
// stride a multiple of 16 bytes), K % 16 == 0. Scales float32, either per output channel [N]
// (block 0) or per block of 128 along K, [N, ceil(K/128)] row-major (block 128: s[n, k / 128]
// scales W[n, k]; a last partial block is allowed). x, y, bias as in gemv_bf16.cu.
// Granule: 16 codes (16 bytes); word i (codes 4i..4i+3) feeds one mma, codes (4i, 4i+1) in the
// low k-slots and (4i+2, 4i+3) in the high ones, x read as it lies in memory.
//
// Numerics: every e4m3 value is exact in bfloat16 and float16 (a bit shuffle and a power-of-two
// rescale; for fp16 on sm_89+ the hardware cvt of cuda_fp8.h), so the tensor cores multiply the
// exact weights. Per-channel scales multiply each column's fp32 sum once at the end; block scales
// multiply the fp32 partial sum of each warp-step (64 values of K, always inside one block)
// before it joins the accumulator (the scales are loaded a super-step ahead, with W). Error
// bound against the float64 product x @ (s * W)^T of the dequantized weights (checked by
// tests/native/test_native_gemv.py):
//   |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (sum_k |x_k s w_k| + |bias|)
// with u = 2^-8 (bfloat16) or 2^-11 (float16). NaN codes (0x7F, 0xFF) in W are not supported
// (pygpukit's quantizer never writes them).
#include <type_traits>

#include "gemv/gemv_kernel.cuh"

namespace pgk {
namespace gemv_detail {
namespace {

// Block scales of one warp-step for the thread's C columns 2t and 2t + 1 of each n-tile: the
// step's 64 values of K lie in block (64 * step) / 128. Loaded a super-step ahead (load_super).
struct Fp8BlockSide {
  float s[kTiles][2];

  template <typename T>
  __device__ void load(const Params& p, const Ctx<T>& c, std::int64_t step) {
    const float* sc = static_cast<const float*>(p.scales);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::int64_t n = c.n0 + 8 * j + 2 * c.t + e;
        s[j][e] = n < p.n && step < c.steps ? __ldg(sc + n * p.ss + (step >> 1)) : 0.f;
      }
    }
  }
};

template <bool kBlock>
struct Fp8 {
  static constexpr int kElems = 16;
  static constexpr int kUnroll = 2;
  using Side = std::conditional_t<kBlock, Fp8BlockSide, NoSide>;

  template <typename T>
  __device__ static void step(const Params&, const Ctx<T>& c, const uint4 (&w)[kTiles],
                              const Side& side, float (&acc)[kTiles][4], std::int64_t step) {
    const std::int64_t gi = step * 4 + c.t;
    const bool ok = gi < c.granules;
    const std::int64_t k0 = gi * kElems;
    const uint4 a0 = ld_x(c.xa, k0, ok), a1 = ld_x(c.xa, k0 + 8, ok);
    const uint4 b0 = ld_x(c.xb, k0, ok), b1 = ld_x(c.xb, k0 + 8, ok);
    // Word i of the granule holds k0 + 4i .. k0 + 4i + 3: x pairs (4i, 4i+1), (4i+2, 4i+3).
    const std::uint32_t alo[4] = {a0.x, a0.z, a1.x, a1.z}, ahi[4] = {a0.y, a0.w, a1.y, a1.w};
    const std::uint32_t blo[4] = {b0.x, b0.z, b1.x, b1.z}, bhi[4] = {b0.y, b0.w, b1.y, b1.w};
    float part[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) part[j][e] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      float* d = kBlock ? part[j] : acc[j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        std::uint32_t lo, hi;
        Ops<T>::e4m3x4(word(w[j], i), lo, hi);
        Ops<T>::mma(d, alo[i], blo[i], ahi[i], bhi[i], lo, hi);
      }
    }
    if constexpr (kBlock) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          acc[j][e] = fmaf(part[j][e], side.s[j][e], acc[j][e]);
          acc[j][e + 2] = fmaf(part[j][e + 2], side.s[j][e], acc[j][e + 2]);
        }
      }
    }
  }

  __device__ static float finish(const Params& p, float v, std::int64_t n) {
    if constexpr (kBlock) {
      return v;
    } else {
      return v * __ldg(static_cast<const float*>(p.scales) + n);
    }
  }
};

}  // namespace
}  // namespace gemv_detail

void gemv_fp8(const GemvArgs& a) {
  gemv_detail::check_common(a, 16, "gemv_fp8");
  PGK_REQUIRE(a.sdtype == DType::f32, "fp8 weights take float32 scales");
  PGK_REQUIRE(a.block == 0 || a.block == 128,
              "fp8 scales are per output channel (block 0) or per block of 128 along K");
  PGK_REQUIRE(a.n == 0 || a.scales != 0, "fp8 weights need scales");
  PGK_REQUIRE(a.block == 0 || a.s_row_stride >= (a.k + 127) / 128,
              "block scales need ceil(k / 128) values per row");
  gemv_detail::dispatch_half(a.dtype, [&](auto t) {
    using T = decltype(t);
    if (a.block == 0) {
      gemv_detail::launch<T, gemv_detail::Fp8<false>>(a, "gemv_fp8_channel_kernel");
    } else {
      gemv_detail::launch<T, gemv_detail::Fp8<true>>(a, "gemv_fp8_block_kernel");
    }
  });
}

}  // namespace pgk
