// The streaming kernel of the 4-bit formats (gemv_w4.cu): W is the A operand of mma.sync
// m16n8k16 (16 rows of W x 16 values of K) and x the B operand (8 rows of x), so one mma
// consumes 256 dequantized weights and serves up to 8 rows of x. The other formats use
// gemv_kernel.cuh, where W is the B operand (128 weights an mma, up to 16 rows of x): for
// decoding (M <= 8) this layout halves the mma count and the x work per weight, which is what
// bounds the 4-bit formats (their dequantization is the costly part of the loop).
//
// Work split. A block owns RT row tiles of 16 rows of W (16 RT output columns) and MT tiles of 8
// rows of x (grid.y walks M in steps of 8 MT). Its warps split K as gemv_kernel.cuh does: W is
// cut into granules of 16 bytes along each row (32 four-bit values), a warp-step is 4
// consecutive granules of the same rows (one per thread t = lane % 4, 128 values of K), and warp
// w takes steps w, w + nwarps, ... Each lane copies its granules of the next step into its own
// slots of a shared-memory ring with cp.async while it decodes the current one (registers stay
// free for occupancy), the scales one step ahead in registers. Partial sums meet in shared
// memory in a fixed warp order (deterministic), then one rounding at the store.
//
// Fragment mapping (PTX ISA, mma.m16n8k16 .bf16/.f16): lane = 4 g + t holds A (= W) rows g and
// g + 8 of the row tile and B (= x^T) column g (= x row g of the x tile); its k-slots are
// {2t, 2t+1} (a0 row g, a1 row g+8, b0) and {2t+8, 2t+9} (a2, a3, b1). C entries c0..c3 are
// (W row g, x row 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). As in gemv_kernel.cuh, thread t fills
// its k-slots from ITS OWN granule in the pairing its dequantizer produces: one 32-bit word of
// W (8 values) decodes to pairs (k0,k4), (k1,k5), (k2,k6), (k3,k7) and feeds two mma, with x
// regrouped the same way (pairs04). Rows of x past M and rows of W past N are zeros, never
// stored.
#pragma once

#include "gemv/gemv_kernel.cuh"

namespace pgk {
namespace gemv_detail {
namespace wa {

constexpr int kRowTile = 16;  // rows of W per mma (A operand)
constexpr int kXTile = 8;     // rows of x per mma (B operand)
constexpr int kWarps = 8;
// Warp-steps of W in a lane's cp.async ring in shared memory (one in flight while one is
// computed). H200, int4 M=1 K8192 N29568, 4 warps a block: 2 stages 46.7 us, 3 stages 53.4, 4
// stages 54.2; holding the next step in registers instead (no ring) 56.1.
constexpr int kStages = 2;
// Blocks from which 4 warps a block beat 8 (more blocks resident, each warp a longer K loop):
// 46.7 vs 52.2 us at N29568 (924 blocks), 17.2 vs 18.8 us at N14336 (448 blocks).
constexpr std::int64_t kManyBlocksWA = 256;

// The thread's view of its block: its W rows (two per row tile: g and g + 8) and x rows.
template <typename T, int RT, int MT>
struct Ctx {
  const unsigned char* wrow[RT][2];
  const unsigned char* srow[RT][2];  // the same rows of the scales (F::kScaleBytes a value)
  bool wok[RT][2];
  const T* xrow[MT];  // x row g of each x tile, nullptr past M
  std::uint32_t i4mask;  // 0x000F000F, in a register (see kernel)
  std::int64_t granules;  // 16-byte granules per W row
  std::int64_t steps;     // warp-steps (4 granules each) per W row
  int t, g;
};

// (a & b) | c in one LOP3.
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Two-byte constants of the 4-bit decoders (duplicated into both halves of a word): the int4
// magic number and bias (int4x8), the e2m1 field shift and mask (e2m1x8), the rebias fold
// (f4_scale, see the note above kF4Unfold).
template <typename T>
struct Bits4;
template <>
struct Bits4<__nv_bfloat16> {  // two-byte constants, duplicated into both halves
  static constexpr std::uint32_t kOne = 0x3F803F80u;
  static constexpr std::uint32_t kI4Magic = 0x43004300u;  // 128: 128 + u in the mantissa, u < 16
  static constexpr std::uint32_t kI4Bias = 0xC308C308u;   // -136 = -(128 + 8)
  static constexpr int kF4Shift = 6;                      // e2m1 bits 14..12 -> bf16 bits 8..6
  static constexpr std::uint32_t kF4Mask = 0x01C001C0u;
  static constexpr std::uint32_t kF4Fold = 0x7B007B00u;  // 2^119 = 2^126 / 2^7
};
template <>
struct Bits4<__half> {
  static constexpr std::uint32_t kOne = 0x3C003C00u;
  static constexpr std::uint32_t kI4Magic = 0x64006400u;  // 1024: 1024 + u in the mantissa
  static constexpr std::uint32_t kI4Bias = 0xE408E408u;   // -1032 = -(1024 + 8)
  static constexpr int kF4Shift = 3;                      // e2m1 bits 14..12 -> f16 bits 11..9
  static constexpr std::uint32_t kF4Mask = 0x0E000E00u;
  static constexpr std::uint32_t kF4Fold = 0x58005800u;  // 2^7 = 2^14 / 2^7
};

// x pairs for the 4-bit formats: r = 16 bytes of x (k 0..7 of the word) -> (k0,k4), (k1,k5),
// (k2,k6), (k3,k7), matching int4x8/e2m1x8.
__device__ __forceinline__ void pairs04(const uint4& r, std::uint32_t (&a)[4]) {
  a[0] = __byte_perm(r.x, r.z, 0x5410);
  a[1] = __byte_perm(r.x, r.z, 0x7632);
  a[2] = __byte_perm(r.y, r.w, 0x5410);
  a[3] = __byte_perm(r.y, r.w, 0x7632);
}

// Eight signed int4 values of q (nibble i = k i, low nibble first) -> four pairs of T:
// p[i] = (k i, k i + 4). Two's complement u -> offset binary u ^ 8, OR-ed into the mantissa of
// the magic number, minus (magic + 8): exact. mask = 0x000F000F in a register (see Ctx::i4mask).
template <typename T>
__device__ __forceinline__ void int4x8(std::uint32_t q, std::uint32_t mask, std::uint32_t (&p)[4]) {
  q ^= 0x88888888u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    p[i] = Ops<T>::fma2(and_or(q >> (4 * i), mask, Bits4<T>::kI4Magic), Bits4<T>::kOne,
                        Bits4<T>::kI4Bias);
  }
}

// x pairs of one word (8 values of K starting at k) for each x tile.
template <typename T, int MT>
__device__ __forceinline__ void x_pairs(const T* const (&xrow)[MT], std::int64_t k, bool ok,
                                        std::uint32_t (&b)[MT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) pairs04(ld_x(xrow[mt], k, ok), b[mt]);
}

// e2m1 codes -> T with the block scale folded in: the rebias 2^(bias - 1) of the codes is split
// into kF4Fold (multiplied into the scale pair once per block, see f4_scale) and 2^7 (kF4Unfold,
// applied to the fp32 sums at the end), so each pair costs one multiply instead of two. With
// the fold, scale * kF4Fold <= 448 * 2^119 (bf16) or 448 * 2^7 (f16) stays finite, and each
// weight e2m1 * scale * 2^-7 (at most 6 significant bits, magnitude >= 2^-17) is exact in bf16
// and in f16 (a subnormal there, but with 2^-22 >= 2^-24 as its last bit).
constexpr float kF4Unfold = 128.f;  // 2^7

// A pair of equal e4m3 block scales (one code, low byte of b) times kF4Fold.
template <typename T>
__device__ __forceinline__ std::uint32_t f4_scale(std::uint32_t b) {
  return Ops<T>::fma2(Ops<T>::e4m3_bcast(b), Bits4<T>::kF4Fold, kNegZero2);
}

// Eight e2m1 codes of q (nibble i = k i) -> four pairs p[i] = (k i, k i + 4), times scale2 (a
// pair of equal block scales from f4_scale): shifting nibble i to the top of each 16-bit half
// puts its sign on T's sign bit; its exponent and mantissa bits move into T's low exponent bits
// and top mantissa bit, so the code reads as e2m1 * 2^-(bias - 1) (the two subnormal codes land
// on T subnormals) and one multiply by scale2 = scale * kF4Fold gives e2m1 * scale * 2^-7,
// exactly (see Bits4::kF4Fold).
template <typename T>
__device__ __forceinline__ void e2m1x8(std::uint32_t q, std::uint32_t scale2,
                                       std::uint32_t (&p)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t v = q << (4 * (3 - i));
    const std::uint32_t bits = (v & 0x80008000u) | ((v >> Bits4<T>::kF4Shift) & Bits4<T>::kF4Mask);
    p[i] = Ops<T>::fma2(bits, scale2, kNegZero2);
  }
}

template <typename T, typename F, int RT, int MT>
__global__ void __launch_bounds__(kWarps * 32) gemv_wa_kernel(const Params p) {
  using Side = typename F::template Side<RT>;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * (kRowTile * RT);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * (kXTile * MT);
  Ctx<T, RT, MT> c;
  c.g = lane >> 2;
  c.t = lane & 3;
  // 0x000F000F that ptxas cannot see as a constant (p.k >= 0): kept in one register instead of
  // being re-materialized before every nibble-decoding LOP3 (measured: one IMAD.MOV per LOP3).
  c.i4mask = 0x000F000Fu | static_cast<std::uint32_t>(p.k < 0 ? p.k : 0);
  c.granules = p.k / F::kElems;
  c.steps = (c.granules + 3) / 4;
  const T* x = static_cast<const T*>(p.x);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const std::int64_t m = m0 + kXTile * mt + c.g;
    c.xrow[mt] = m < p.m ? x + m * p.sx : nullptr;
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t n = n0 + kRowTile * r + 8 * h + c.g;
      c.wok[r][h] = n < p.n;
      const std::int64_t row = c.wok[r][h] ? n : 0;
      c.wrow[r][h] = p.w + row * p.sw;
      c.srow[r][h] = static_cast<const unsigned char*>(p.scales) + row * p.ss * F::kScaleBytes;
    }
  }
  const std::int64_t steps = c.steps;

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][mt][e] = 0.f;
    }
  }
  // Each lane streams its own granules through a private ring slot ([stage][granule][lane],
  // 16 bytes: conflict-free), kStages - 1 warp-steps ahead of the math, with no registers
  // held for them; the scales are prefetched one step ahead in registers.
  __shared__ uint4 ring[kWarps][kStages][RT * 2][32];
  uint4(*const mine)[RT * 2][32] = ring[warp];
  const auto issue = [&](uint4(*slot)[32], std::int64_t step) {
    const std::int64_t gi = step * 4 + c.t;
    const bool ok = gi < c.granules;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        cp_async16(&slot[r * 2 + h][lane], c.wrow[r][h] + (ok ? gi * 16 : 0), ok && c.wok[r][h]);
      }
    }
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    issue(mine[j], warp + static_cast<std::int64_t>(j) * nwarps);
    cp_async_commit();
  }
  Side side, nside;
  side.load(p, c, warp);
  int stage = 0;
  for (std::int64_t s = warp; s < steps; s += nwarps) {
    nside.load(p, c, s + nwarps);  // zeros past the end
    const int ahead = stage == 0 ? kStages - 1 : stage - 1;  // the slot read last step
    issue(mine[ahead], s + static_cast<std::int64_t>(kStages - 1) * nwarps);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this step's group has landed
    uint4 w[RT][2];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) w[r][h] = mine[stage][r * 2 + h][lane];
    }
    F::template step<T, RT, MT>(c, w, side, acc, s);
    side = nside;
    stage = stage == kStages - 1 ? 0 : stage + 1;
  }
  cp_async_wait<0>();
  // C value e of row tile r and x tile mt: W row (output column) g or g + 8 (e >> 1), x row 2t
  // or 2t + 1 (e & 1).
  epilogue<T, F, kWarps>(p, acc, [m0, n0](int i, int l, std::int64_t& m, std::int64_t& n) {
    const int e = i & 3, mt = (i >> 2) % MT, r = (i >> 2) / MT;
    n = n0 + kRowTile * r + (l >> 2) + (e >> 1) * 8;
    m = m0 + kXTile * mt + 2 * (l & 3) + (e & 1);
  });
}

// Two row tiles (32 output columns) a block; one x tile up to 8 rows of x, two beyond (W is read
// once per 16 rows of x, as in gemv_kernel.cuh).
template <typename T, typename F>
void launch(const GemvArgs& a, const char* name) {
  if (a.m == 0 || a.n == 0) return;
  constexpr int RT = 2;  // 16-row tiles a block (RT = 1: 51.9 us at the shape above)
  const Params p = make_params(a);
  const std::int64_t nblk = (a.n + kRowTile * RT - 1) / (kRowTile * RT);
  const bool one = a.m <= kXTile;
  const std::int64_t mblk = one ? 1 : (a.m + 2 * kXTile - 1) / (2 * kXTile);
  // Few blocks (small N): more warps per block split K finer, keeping bytes in flight.
  const int warps = nblk * mblk >= kManyBlocksWA ? 4 : kWarps;
  const dim3 grid(static_cast<unsigned>(nblk), static_cast<unsigned>(mblk));
  use_device(a.device);
  if (one) {
    gemv_wa_kernel<T, F, RT, 1><<<grid, warps * 32, 0, as_stream(a.stream)>>>(p);
  } else {
    gemv_wa_kernel<T, F, RT, 2><<<grid, warps * 32, 0, as_stream(a.stream)>>>(p);
  }
  PGK_CHECK_LAUNCH(name);
}

}  // namespace wa
}  // namespace gemv_detail
}  // namespace pgk
