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
// Kernel: gemv_wa.cuh (W as the A operand of the mma). Granule: 32 values (16 bytes); word i
// (values 8i..8i+7) of two W rows feeds two mma: the dequantizers produce pairs (8i+j, 8i+j+4),
// so x is regrouped the same way with byte permutes (pairs04: each step in the loop, or once a
// block where one row of x is staged in shared memory, wa::XFrom).
//
// Numerics: int4 values are exact in bf16/f16; the fp32 partial sum of each warp-step (128
// values of K = one scale group) is multiplied by its group scale before it joins the
// accumulator. nvfp4: e2m1 value * e4m3 block scale is exact in bf16 and f16 (at most 6
// significant bits, magnitudes in [2^-10, 2688]), so the tensor cores multiply exact dequantized
// weights except the fp32 global scale, applied once per column at the end. Error bound against
// the float64 product x @ dequant(W)^T (checked by tests/native/test_native_gemv.py):
//   |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (sum_k |x_k dequant(W)_k| + |bias|)
// with u = 2^-8 (bfloat16) or 2^-11 (float16).
#include "gemv/gemv_wa.cuh"

namespace pgk {
namespace gemv_detail {
namespace {

template <typename S>
struct Int4 {
  static constexpr int kElems = 32;
  static constexpr int kScaleBytes = sizeof(S);
  // From 1024 blocks of 16 output columns at up to 8 rows of x (wa::launch_few_rows): Wide,
  // then Wider from kWiderFrom blocks. Measured on an H200 (BENCHMARKS.md "GEMV"): one row tile
  // took 0.86-0.91x the time of two at 1536-1848 blocks (K 4096-8192), two 0.92x that of one at
  // 9496 (K 4096, N 151936); at 1024 (K 2048) one row tile took 1.02x.
  using Wide = wa::Config<1, 1, 4, 2, 8>;
  using Wider = wa::Config<2, 1, 4, 2>;
  static constexpr std::int64_t kWiderFrom = 4096;
  // x regrouped in the decoders' pairs (wa::pairs04). One row of x staged in shared memory
  // (wa::launch_rule) at 512 to 1023 blocks up to K 4096, where it measured 0.96-1.00x the time
  // of x read in the loop (H200, M = 1, 512-896 blocks; K 8192 at 896 blocks 1.03x). Elsewhere
  // level or slower alone (128-192 blocks 1.03-1.11x, 1024-1536 level, 1848 blocks at K 8192
  // 1.05x), except 256 blocks at K 12288-16384 (0.92-0.95x alone): there, as the down
  // projection of the Qwen3-8B shape's decode step (launched early behind the gate/up product),
  // it made the step 0.9% slower, so long rows read x in the loop.
  static constexpr bool kPairs04 = true;
  static constexpr std::int64_t kStageFromBlocks = 512, kStageToBlocks = 1024, kStageMaxK = 4096;
  // No Tail (wa::launch_rule). Alone it took 0.88-0.99x the time of Wide at 1024-3328 blocks (K
  // 4096, M = 1, plain and gated, H200; 1.00-1.02x at 1664), but in the Qwen3-8B shape's decode
  // step, whose gated gate/up product (1536 blocks) is launched early, it made the step 1.4%
  // longer (2177 -> 2207 us): the staged row is copied after the wait for the kernel ahead,
  // where x read in the loop is not held back (as at 256 blocks, above).
  static constexpr std::int64_t kTailFromBlocks = 0, kTailToBlocks = 0;
  static constexpr bool kTailGated = false;

  // Group scales of one warp-step (its 128 values of K are scale group `step`) for the thread's
  // W rows g and g + 8 of each row tile, in fp32. Loaded a step ahead (gemv_wa.cuh).
  template <int RT>
  struct Side {
    float s[RT][2];

    template <typename X>
    __device__ void load(const Params&, const X& c, int step) {
      const bool in = step < c.steps;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          s[r][h] = in ? to_compute(*reinterpret_cast<const S*>(c.snext[r][h])) : 0.f;
        }
      }
    }
  };
  // Bytes from a scale row's start to warp-step `step`'s scale (Ctx::snext).
  __host__ __device__ static constexpr int scale_offset(int step, int) {
    return step * static_cast<int>(sizeof(S));
  }

  template <typename T, int RT, int MT, typename X>
  __device__ __forceinline__ static void step(const X& c, const uint4 (&w)[RT][2],
                                              const Side<RT>& side, float (&acc)[RT][MT][4]) {
    float part[RT][MT][4];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) part[r][mt][e] = 0.f;
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      std::uint32_t b[MT][4];
      wa::x_pairs(c, i, b);
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        std::uint32_t va[4], vb[4];
        wa::int4x8<T>(word(w[r][0], i), c.i4lo, c.i4hi, va);
        wa::int4x8<T>(word(w[r][1], i), c.i4lo, c.i4hi, vb);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Ops<T>::mma(part[r][mt], va[0], vb[0], va[1], vb[1], b[mt][0], b[mt][1]);
          Ops<T>::mma(part[r][mt], va[2], vb[2], va[3], vb[3], b[mt][2], b[mt][3]);
        }
      }
    }
    // c0, c1 belong to W row g, c2, c3 to row g + 8.
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[r][mt][e] = fmaf(part[r][mt][e], side.s[r][e >> 1], acc[r][mt][e]);
        }
      }
    }
  }

  __device__ static float finish(const Params&, float v, std::int64_t) { return v; }
};

struct Nvfp4 {
  static constexpr int kElems = 32;
  static constexpr int kScaleBytes = 1;
  // From 1024 blocks (wa::launch_few_rows): one row tile, 4 warps, at every block count
  // measured (1024-9496: 0.88-0.95x the time of two row tiles of 8 warps).
  using Wide = wa::Config<1, 1, 4, 2>;
  using Wider = Wide;
  static constexpr std::int64_t kWiderFrom = 0;
  static constexpr bool kPairs04 = true;  // as Int4's
  // One row of x staged in shared memory from 512 blocks up to K 8192 (wa::launch_rule:
  // 0.89-0.95x the time of x read in the loop there).
  static constexpr std::int64_t kStageFromBlocks = 512, kStageToBlocks = wa::kNoBlockLimit,
                                kStageMaxK = 8192;
  // Past the first wave of the staged launch (at K 4096: 1320 blocks, 10 a multiprocessor on an
  // H200's 132) to 2047 blocks, K 4096-8192, the plain product in bfloat16 takes
  // wa::launch_rule's Tail: 0.90-1.00x the time at 1328-1848 blocks (M = 1, H200; timed at K
  // 4096, 5120, 6144 and 8192), against 1.07x at 1280 and level at 2048; at K 2048 1.04-1.05x,
  // at K 3072 0.98x at one shape (so K under 4096 keeps the rule, as does float16,
  // not timed). Decode steps with a gate/up product in the range: Qwen3-8B shape (1536 blocks)
  // 2419 us instead of 2484, Llama-3.1-8B shape (1792) 2270 instead of 2296. The gated product
  // was level or slower there (0.99-1.04x) and keeps the rule.
  static constexpr std::int64_t kTailFromBlocks = 1321, kTailToBlocks = 2048, kTailMinK = 4096,
                                kTailMaxK = 8192;
  static constexpr bool kTailGated = false;

  // The e4m3 scales of blocks 2 gi and 2 gi + 1 (16 values each) of the thread's W rows g and
  // g + 8 of each row tile, one 2-byte load a row, a step ahead (gemv_wa.cuh).
  template <int RT>
  struct Side {
    std::uint32_t pair[RT][2];

    template <typename X>
    __device__ void load(const Params&, const X& c, int step) {
      const bool in = step * 4 + c.t < c.granules;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          pair[r][h] = 0;
          if (in) pair[r][h] = __ldg(reinterpret_cast<const unsigned short*>(c.snext[r][h]));
        }
      }
    }
  };
  // Bytes from a scale row's start to the block scales of granule 4 step + t (Ctx::snext).
  __host__ __device__ static constexpr int scale_offset(int step, int t) {
    return 2 * (step * 4 + t);
  }

  template <typename T, int RT, int MT, typename X>
  __device__ __forceinline__ static void step(const X& c, const uint4 (&w)[RT][2],
                                              const Side<RT>& side, float (&acc)[RT][MT][4]) {
    std::uint32_t s2[RT][2][2];  // [row tile][row g / g + 8][block of 16]
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s2[r][h][0] = wa::f4_scale<T, 0>(side.pair[r][h]);
        s2[r][h][1] = wa::f4_scale<T, 1>(side.pair[r][h]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      std::uint32_t b[MT][4];
      wa::x_pairs(c, i, b);
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        std::uint32_t va[4], vb[4];
        wa::e2m1x8<T>(word(w[r][0], i), s2[r][0][i >> 1], va);
        wa::e2m1x8<T>(word(w[r][1], i), s2[r][1][i >> 1], vb);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Ops<T>::mma(acc[r][mt], va[0], vb[0], va[1], vb[1], b[mt][0], b[mt][1]);
          Ops<T>::mma(acc[r][mt], va[2], vb[2], va[3], vb[3], b[mt][2], b[mt][3]);
        }
      }
    }
  }

  __device__ static float finish(const Params& p, float v, std::int64_t) {
    return v * wa::kF4Unfold * p.gscale;
  }
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
      gemv_detail::wa::launch<T, gemv_detail::Int4<float>>(a, "gemv_int4_kernel");
    } else if (a.sdtype == DType::bf16) {
      gemv_detail::wa::launch<T, gemv_detail::Int4<__nv_bfloat16>>(a, "gemv_int4_kernel");
    } else {
      gemv_detail::wa::launch<T, gemv_detail::Int4<__half>>(a, "gemv_int4_kernel");
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
    gemv_detail::wa::launch<T, gemv_detail::Nvfp4>(a, "gemv_nvfp4_kernel");
  });
}

}  // namespace pgk
