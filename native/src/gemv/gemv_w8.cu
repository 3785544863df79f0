// W8A16 GEMV: y[M, N] = x[M, K] @ (s * W)^T + bias with W float8_e4m3fn [N, K] and float32
// scales s, x and y bfloat16 or float16.
//
// Layout: W row-major [N, K] (one byte a value, row n = output column n, 16-byte aligned, row
// stride a multiple of 16 bytes), K % 16 == 0. Scales float32, either per output channel [N]
// (block 0) or per block of 128 along K, [N, ceil(K/128)] row-major (block 128: s[n, k / 128]
// scales W[n, k]; a last partial block is allowed). x, y, bias as in gemv_bf16.cu.
//
// Kernel: gemv_wa.cuh (W the A operand of the mma: 256 weights an mma, x regrouped by nothing).
// Granule: 16 codes (16 bytes); word i (codes 4i..4i+3) of the lane's granule in W rows g and
// g + 8 gives the A pairs (codes 4i, 4i+1 in the low k-slots, 4i+2, 4i+3 in the high ones), and
// x words 2i and 2i + 1 of the same 16 values of K the B pair, as they lie in memory. On
// gemv_kernel.cuh (W the B operand, 128 weights an mma) the same format took 1.2-1.6x as long
// at M = 1 on an H200 (BENCHMARKS.md "GEMV"): half the mma, and no register moves to build
// the x operand.
//
// Numerics: every e4m3 value is exact in bfloat16 and float16 (a bit shuffle and a power-of-two
// rescale; for fp16 on sm_89+ the hardware cvt of cuda_fp8.h), so the tensor cores multiply the
// exact weights. Per-channel scales multiply each column's fp32 sum once at the end; block scales
// multiply the fp32 partial sum of each warp-step (64 values of K, always inside one block)
// before it joins the accumulator (the scales are loaded a step ahead, with W). Error bound
// against the float64 product x @ (s * W)^T of the dequantized weights (checked by
// tests/native/test_native_gemv.py):
//   |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (sum_k |x_k s w_k| + |bias|)
// with u = 2^-8 (bfloat16) or 2^-11 (float16). NaN codes (0x7F, 0xFF) in W are not supported
// (pygpukit's quantizer never writes them).
#include "gemv/gemv_wa.cuh"

namespace pgk {
namespace gemv_detail {
namespace {

template <bool kBlock>
struct Fp8 {
  static constexpr int kElems = 16;
  static constexpr int kScaleBytes = 4;
  // From 1024 blocks of 16 output columns at up to 8 rows of x (wa::launch_few_rows): Wide,
  // then Wider from kWiderFrom blocks. Measured on an H200 (BENCHMARKS.md "GEMV"): per-channel
  // scales keep two row tiles of 4 warps (within 4% of the best configuration at 1024-9496
  // blocks); block scales take one row tile of 8 warps (0.91-0.98x the time of two row tiles).
  using Wide = std::conditional_t<kBlock, wa::Config<1, 1, 8, 2>, wa::Config<2, 1, 4, 2>>;
  using Wider = Wide;
  static constexpr std::int64_t kWiderFrom = 0;
  // x as it lies (one fp8 word feeds one mma). Outside the RMSNorm form x is read in the loop,
  // never staged in shared memory (wa::launch_rule: 0.94-1.34x, slower on the wide shapes).
  static constexpr bool kPairs04 = false;
  static constexpr std::int64_t kStageFromBlocks = 0, kStageToBlocks = 0;
  static constexpr std::int64_t kTailFromBlocks = 0, kTailToBlocks = 0;  // no Tail either
  static constexpr bool kTailGated = false;

  // Block scales of one warp-step for the thread's W rows g and g + 8 of each row tile: the
  // step's 64 values of K lie in block step / 2. Loaded a step ahead.
  template <int RT>
  struct Side {
    float s[RT][2];

    template <typename X>
    __device__ void load(const Params&, const X& c, int step) {
      if constexpr (kBlock) {
        const bool in = step < c.steps;
#pragma unroll
        for (int r = 0; r < RT; ++r) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            s[r][h] = in ? __ldg(reinterpret_cast<const float*>(c.snext[r][h])) : 0.f;
          }
        }
      }
    }
  };
  // Bytes from a scale row's start to warp-step `step`'s block scale (Ctx::snext; per-channel
  // scales are read in finish, not streamed).
  __host__ __device__ static constexpr int scale_offset(int step, int) {
    return kBlock ? (step >> 1) * 4 : 0;
  }

  template <typename T, int RT, int MT, typename X>
  __device__ __forceinline__ static void step(const X& c, const uint4 (&w)[RT][2],
                                              const Side<RT>& side, float (&acc)[RT][MT][4]) {
    uint4 xv[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        xv[mt][j] = make_uint4(0u, 0u, 0u, 0u);
        if (c.xvalid(mt)) xv[mt][j] = c.xload(mt, j);
      }
    }
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
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        std::uint32_t lo, hi, lo8, hi8;
        Ops<T>::e4m3x4(word(w[r][0], i), lo, hi);
        Ops<T>::e4m3x4(word(w[r][1], i), lo8, hi8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          float* d = kBlock ? part[r][mt] : acc[r][mt];
          const uint4& v = xv[mt][i >> 1];
          const std::uint32_t b0 = (i & 1) ? v.z : v.x, b1 = (i & 1) ? v.w : v.y;
          Ops<T>::mma(d, lo, lo8, hi, hi8, b0, b1);
        }
      }
    }
    if constexpr (kBlock) {
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
      gemv_detail::wa::launch<T, gemv_detail::Fp8<false>>(a, "gemv_fp8_channel_kernel");
    } else {
      gemv_detail::wa::launch<T, gemv_detail::Fp8<true>>(a, "gemv_fp8_block_kernel");
    }
  });
}

}  // namespace pgk
