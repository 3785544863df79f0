// The streaming kernel of the quantized formats (gemv_w4.cu: int4 and nvfp4; gemv_w8.cu: fp8):
// W is the A operand of mma.sync m16n8k16 (16 rows of W x 16 values of K) and x the B operand (8
// rows of x), so one mma consumes 256 dequantized weights and serves up to 8 rows of x. Dense
// weights use gemv_kernel.cuh, where W is the B operand (128 weights an mma, up to 16 rows of
// x): for decoding (M <= 8) this layout halves the mma count and the x work per weight. These
// kernels are bound by instruction issue, not by DRAM (Nsight Compute on an H200, int4 at K8192
// N29568: SM throughput 73%, DRAM 43%, 0.68 instructions issued a cycle per scheduler), so
// what the loop spends per weight decides their speed: the decoders (int4x8: 11 instructions for
// 8 values in bfloat16, 9 in float16), and stream bookkeeping by pointer increments rather than
// index arithmetic per step.
//
// Work split. A block owns RT row tiles of 16 rows of W (16 RT output columns) and MT tiles of 8
// rows of x (grid.y walks M in steps of 8 MT). Its warps split K as gemv_kernel.cuh does: W is
// cut into granules of 16 bytes along each row (32 four-bit or 16 fp8 values), a warp-step is 4
// consecutive granules of the same rows (one per thread t = lane % 4), and warp
// w takes steps w, w + nwarps, ... Each lane copies its granules of the next step into its own
// slots of a shared-memory ring with cp.async while it decodes the current one (registers stay
// free for occupancy), the scales one step ahead in registers. x is read in the loop, or (one
// row, XFrom) staged in shared memory by each block first (gemv_wa_x.cuh). Partial sums meet in
// shared memory in a fixed warp order (deterministic), then one rounding at the store.
//
// Fragment mapping (PTX ISA, mma.m16n8k16 .bf16/.f16): lane = 4 g + t holds A (= W) rows g and
// g + 8 of the row tile and B (= x^T) column g (= x row g of the x tile); its k-slots are
// {2t, 2t+1} (a0 row g, a1 row g+8, b0) and {2t+8, 2t+9} (a2, a3, b1). C entries c0..c3 are
// (W row g, x row 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). As in gemv_kernel.cuh, thread t fills
// its k-slots from ITS OWN granule in the pairing its dequantizer produces: one 32-bit word of
// 4-bit W (8 values) decodes to pairs (k0,k4), (k1,k5), (k2,k6), (k3,k7) and feeds two mma, with
// x regrouped the same way (pairs04); one word of fp8 W (4 values) feeds one mma with x as it
// lies (gemv_w8.cu). Rows of x past M load zeros (read row 0 where x is in shared memory); rows
// of W past N read row 0 of W: their sums are never stored.
#pragma once

#include <limits>

#include "gemv/gemv_kernel.cuh"
#include "gemv/gemv_wa_x.cuh"

namespace pgk {
namespace gemv_detail {
namespace wa {

constexpr int kRowTile = 16;  // rows of W per mma (A operand)
constexpr int kXTile = 8;     // rows of x per mma (B operand)
// No upper bound on the blocks of a launch rule's range (F::kStageToBlocks).
constexpr std::int64_t kNoBlockLimit = std::numeric_limits<std::int64_t>::max();

// A launch configuration: RT row tiles of 16 W rows a block, MT x tiles of 8 rows, Warps warps
// splitting K, Stages warp-steps of W in each lane's cp.async ring in shared memory (Stages - 1
// in flight while one is computed), MinBlocks the blocks a multiprocessor must hold
// (__launch_bounds__; 0: no register cap). The ring and the reduction buffer are sized for
// exactly Warps warps, so a configuration's shared memory is what its launch uses.
template <int RT_, int MT_, int Warps_, int Stages_, int MinBlocks_ = 0>
struct Config {
  static constexpr int RT = RT_, MT = MT_, Warps = Warps_, Stages = Stages_;
  static constexpr int MinBlocks = MinBlocks_;
  static_assert(Stages >= 2, "the ring needs one step in flight while one is computed");
  // The ring (16 bytes a lane a W row) and the epilogue's reduction buffer (4 bytes a value)
  // are static shared memory: 48 KiB at most a block.
  static_assert(Warps * (Stages * RT * 2 * 32 * 16 + RT * MT * 4 * 32 * 4) <= 48 * 1024,
                "static shared memory above 48 KiB");
};

// The thread's view of its block: its W rows (two per row tile: g and g + 8) and x rows. XS:
// x lies in shared memory (XFrom::shared or norm: one row), else in global memory.
template <typename T, int RT, int MT, bool XS = false, int XJ = 8>
struct Ctx {
  static constexpr bool kShared = XS;
  // The scales of the next Side::load's warp-step in the thread's rows: snext points at that
  // step's scale bytes of each row (F::scale_offset). Rows of W past N read row 0 of W and of
  // the scales (valid memory; their sums are never stored), so the loads in the loop need no
  // row predicate. Loop-carried like the W stream: ptxas re-derived the row addresses from the
  // thread index every step otherwise.
  const unsigned char* snext[RT][2];
  // x row g of each x tile at the current step's granule (in shared memory, 4-bit formats: its
  // word 0 at staged_index, the next words XJ values apart)
  const T* xcur[MT];
  // Granules of x row g of each x tile from the current step's on (0 for rows past M): the
  // step reads x where it is > 0. Loop-carried, so ptxas cannot re-derive the row test from
  // the thread index every step (it did, to save registers).
  int xleft[MT];
  std::uint32_t i4lo, i4hi;  // the int4 decoder's xor-magic words, in registers (see int4x8)
  // Granule and step counts are 32-bit (check_common bounds K): the loop's compares and
  // offsets are then one instruction each instead of two.
  int granules;  // 16-byte granules per W row
  int steps;     // warp-steps (4 granules each) per W row
  int t, g;

  // Moves the scale stream to the lane's next warp-step (Warps steps on). F::scale_offset is
  // linear in the step over the strides used (an even warp count).
  template <typename F, int Warps>
  __device__ __forceinline__ void next_scales() {
    static_assert(Warps % 2 == 0, "fp8's block scale index step / 2 advances by Warps / 2");
    constexpr int kAdvance = F::scale_offset(Warps, 0) - F::scale_offset(0, 0);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) snext[r][h] += kAdvance;
    }
  }

  // Whether the step reads x row g of tile mt. x in shared memory (XS) is zero-padded to the
  // loop's last granule and every lane's row is a real one (rows past M read row 0: their sums
  // are never stored), so no load there needs a test or a zeroed register.
  __device__ __forceinline__ bool xvalid(int mt) const { return XS || xleft[mt] > 0; }

  // 16 bytes j of x row g of tile mt at the current step (x values 8 j ... 8 j + 7 of it; in
  // shared memory, the 4-bit formats' pair order XJ values apart, see staged_index).
  __device__ __forceinline__ uint4 xload(int mt, int j) const {
    if constexpr (XS) {
      return *reinterpret_cast<const uint4*>(xcur[mt] + XJ * j);
    } else {
      return __ldg(reinterpret_cast<const uint4*>(xcur[mt] + 8 * j));
    }
  }
};

// Two-byte constants of the 4-bit decoders (duplicated into both halves of a word): the int4
// magic numbers and biases (int4x8), the e2m1 sign lift and layout (e2m1x8), the rebias fold
// (f4_scale, see the note above kF4Unfold).
template <typename T>
struct Bits4;
template <>
struct Bits4<__nv_bfloat16> {  // two-byte constants, duplicated into both halves
  static constexpr std::uint32_t kOne = 0x3F803F80u;
  // 128 + (u ^ 8) in the mantissa for a nibble u at bits 3..0. A nibble at bits 7..4 does not
  // fit bfloat16's 7-bit mantissa, so every nibble is shifted down (kI4XorHi: unused).
  static constexpr std::uint32_t kI4XorLo = 0x43084308u;
  static constexpr std::uint32_t kI4XorHi = 0u;
  static constexpr std::uint32_t kI4Bias = 0xC308C308u;  // -136 = -(128 + 8)
  // e2m1x8: exponent and mantissa at bits 8..6, the sign 7 bits above; the lift lands nibble
  // j's sign on bit 4 j + 9 (mod 16), bit 1 of nibble j + 2, so pairs 0 and 1 (nibbles 0, 1,
  // 4, 5) share one word and pairs 2 and 3 the other.
  static constexpr int kF4Lift = 6, kF4Low = 6;
  __host__ __device__ static constexpr int f4_word(int i) { return i >> 1; }
  static constexpr std::uint32_t kF4Fold = 0x7B007B00u;  // 2^119 = 2^126 / 2^7
};
template <>
struct Bits4<__half> {
  static constexpr std::uint32_t kOne = 0x3C003C00u;
  // 1024 + (u ^ 8) in the mantissa for a nibble u at bits 3..0, 1024 + 16 (u ^ 8) at bits 7..4
  static constexpr std::uint32_t kI4XorLo = 0x64086408u;
  static constexpr std::uint32_t kI4XorHi = 0x64806480u;
  static constexpr std::uint32_t kI4Bias = 0xE408E408u;    // -1032 = -(1024 + 8)
  static constexpr std::uint32_t kSixteenth = 0x2C002C00u;  // 1/16
  static constexpr std::uint32_t kI4BiasHi = 0xD480D480u;   // -72 = -(1024 / 16 + 8)
  // e2m1x8: exponent and mantissa at bits 11..9, the sign 4 bits above; the lift lands nibble
  // j's sign on bit 4 j + 6 (mod 16), bit 2 of nibble j + 1, so pairs 0 and 2 (nibbles 0, 2,
  // 4, 6) share one word and pairs 1 and 3 the other.
  static constexpr int kF4Lift = 3, kF4Low = 9;
  __host__ __device__ static constexpr int f4_word(int i) { return i & 1; }
  static constexpr std::uint32_t kF4Fold = 0x58005800u;  // 2^7 = 2^14 / 2^7
};

// (a & b) ^ c in one LOP3.
__device__ __forceinline__ std::uint32_t and_xor(std::uint32_t a, std::uint32_t b,
                                                 std::uint32_t c) {
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// e2m1x8's masks, from Bits4<T>'s lift, low bit and pair-to-word map: a pair's bits (its sign
// and the three bits from kF4Low, in each half), the sign slots of word w (bit 4 n + 3 + kF4Lift
// of each nibble n of the pairs it serves: nibbles i and i + 4 of pair i) and the bits the word
// keeps from q (the three low bits of those nibbles).
template <typename T>
struct F4Layout {
  using B = Bits4<T>;
  static constexpr std::uint32_t kPair =
      0x80008000u | (7u << B::kF4Low) | (7u << (B::kF4Low + 16));
  __host__ __device__ static constexpr std::uint32_t nibble_bits(int w, int offset,
                                                                 std::uint32_t bits) {
    std::uint32_t m = 0;
    for (int i = 0; i < 4; ++i) {
      if (B::f4_word(i) != w) continue;
      m |= bits << ((4 * i + offset) & 31);
      m |= bits << ((4 * i + 16 + offset) & 31);
    }
    return m;
  }
  __host__ __device__ static constexpr std::uint32_t slots(int w) {
    return nibble_bits(w, 3 + B::kF4Lift, 1u);
  }
  __host__ __device__ static constexpr std::uint32_t kept(int w) { return nibble_bits(w, 0, 7u); }
};

// Bits of a where c is set, of b elsewhere, in one LOP3 (c an immediate: written as C++,
// ptxas spends a second LOP3 on c's complement).
template <std::uint32_t C>
__device__ __forceinline__ std::uint32_t select_bits(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(d) : "r"(a), "r"(b), "n"(C));
  return d;
}

// Eight signed int4 values of q (nibble i = k i, low nibble first) -> four pairs of T:
// p[i] = (k i, k i + 4). One LOP3 takes a nibble of both halves (at bits 3..0) and XORs in the
// magic number with bit 3 set: two's complement u becomes offset binary u ^ 8 inside the
// mantissa of the magic (128 for bfloat16, 1024 for float16); one FMA removes the magic and the
// offset, exactly. float16's 10-bit mantissa also holds a nibble at bits 7..4 (16 times larger,
// magic bit 7 set, the FMA multiplies by 1/16), so one shift by 8 serves all four pairs: 9
// instructions for 8 values; bfloat16 shifts by 4, 8 and 12: 11. lo, hi =
// Bits4<T>::kI4XorLo / kI4XorHi held in registers (Ctx::i4lo, i4hi: ptxas would otherwise
// re-materialize them before every LOP3).
template <typename T>
__device__ __forceinline__ void int4x8(std::uint32_t q, std::uint32_t lo, std::uint32_t hi,
                                       std::uint32_t (&p)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    const std::uint32_t q8 = q >> 8;
    p[0] = Ops<T>::fma2(and_xor(q, 0x000F000Fu, lo), Bits4<T>::kOne, Bits4<T>::kI4Bias);
    p[1] = Ops<T>::fma2(and_xor(q, 0x00F000F0u, hi), Bits4<T>::kSixteenth, Bits4<T>::kI4BiasHi);
    p[2] = Ops<T>::fma2(and_xor(q8, 0x000F000Fu, lo), Bits4<T>::kOne, Bits4<T>::kI4Bias);
    p[3] = Ops<T>::fma2(and_xor(q8, 0x00F000F0u, hi), Bits4<T>::kSixteenth, Bits4<T>::kI4BiasHi);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p[i] = Ops<T>::fma2(and_xor(q >> (4 * i), 0x000F000Fu, lo), Bits4<T>::kOne,
                          Bits4<T>::kI4Bias);
    }
  }
}

// e2m1 codes -> T with the block scale folded in: the rebias 2^(bias - 1) of the codes is split
// into kF4Fold (multiplied into the scale pair once per block, see f4_scale) and 2^7 (kF4Unfold,
// applied to the fp32 sums at the end), so each pair costs one multiply instead of two. With
// the fold, scale * kF4Fold <= 448 * 2^119 (bf16) or 448 * 2^7 (f16) stays finite, and each
// weight e2m1 * scale * 2^-7 (at most 6 significant bits, magnitude >= 2^-17) is exact in bf16
// and in f16 (a subnormal there, but with 2^-22 >= 2^-24 as its last bit).
constexpr float kF4Unfold = 128.f;  // 2^7

// A pair of equal e4m3 block scales (one code, byte K of w) times kF4Fold.
template <typename T, int K>
__device__ __forceinline__ std::uint32_t f4_scale(std::uint32_t w) {
  return Ops<T>::fma2(Ops<T>::template e4m3_bcast_byte<K>(w), Bits4<T>::kF4Fold, kNegZero2);
}

// Eight e2m1 codes of q (nibble i = k i) -> four pairs p[i] = (k i, k i + 4), times scale2 (a
// pair of equal block scales from f4_scale). A code's exponent and mantissa bits, moved into T's
// low exponent bits and top mantissa bit (bits kF4Low + 2 .. kF4Low of each half), read as
// e2m1 * 2^-(bias - 1) (the two subnormal codes land on T subnormals), its sign bit on T's sign
// bit; one multiply by scale2 = scale * kF4Fold then gives e2m1 * scale * 2^-7, exactly (see
// Bits4::kF4Fold). The sign must move kF4Lift bits further than the other three, so a copy of q
// rotated by kF4Lift supplies the signs: in each of two words, the signs of two nibble pairs sit
// kF4Lift + 1 bits above their exponent (in slots no other bit of those nibbles uses) and
// the rest is q. (One word cannot serve all four pairs: each slot is a bit of another nibble.)
// Pair i is then one shift (a rotation where its bits wrap around) and one mask of its word:
// 3 + 4 x 3 instructions for 8 values with the multiplies, where a shift each for the sign and
// the rest took 19-20; the bf16 loop with x staged went from 233 to 193 instructions a
// warp-step (nvcc 13.0). Bit for bit the same values (BENCHMARKS.md "GEMV").
template <typename T>
__device__ __forceinline__ void e2m1x8(std::uint32_t q, std::uint32_t scale2,
                                       std::uint32_t (&p)[4]) {
  using B = Bits4<T>;
  using L = F4Layout<T>;
  static_assert((L::slots(0) & L::kept(0)) == 0 && (L::slots(1) & L::kept(1)) == 0,
                "a sign slot falls on a bit its word keeps from q");
  const std::uint32_t lifted = __funnelshift_l(q, q, B::kF4Lift);
  const std::uint32_t word[2] = {select_bits<L::slots(0)>(lifted, q),
                                 select_bits<L::slots(1)>(lifted, q)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // nibble i's lowest bit (4 i) goes to kF4Low; past kF4Low, bits wrap around from the top
    const int s = (B::kF4Low - 4 * i) & 31;
    const std::uint32_t w = word[B::f4_word(i)];
    const std::uint32_t moved = s <= B::kF4Low ? w << s : __funnelshift_l(w, w, s);
    p[i] = Ops<T>::fma2(moved & L::kPair, scale2, kNegZero2);
  }
}

// Gated (GemvArgs::gated, its own instantiations so the plain kernels are untouched): W holds
// n = 2I rows, and lane row g of a row tile is the gate row o = 8 tile + g of output column o
// (tile = RT blockIdx.x + r), lane row g + 8 its up row I + o. The lane holding one sum holds
// the other (C's c0, c1 and c2, c3), and the epilogue stores silu(g) * u (kUp = 2). A gated row
// tile covers 8 output columns with 16 rows of W like any other, so the grid is the same.
//
// Xf (XFrom): x read from global memory in the loop, or one row in dynamic shared memory,
// copied (stage_row) or normalised (norm_row: GemvArgs::norm, not gated) by every block after
// the weights' first loads and the wait; the loop is the same with shared loads of x.
template <typename T, typename F, typename C, bool Gated, XFrom Xf = XFrom::global>
__global__ void __launch_bounds__(C::Warps * 32, C::MinBlocks)
    gemv_wa_kernel(const Params p) {
  constexpr bool Norm = Xf == XFrom::norm, XS = Xf != XFrom::global;
  static_assert(!(Gated && Norm), "the RMSNorm form has no gated product");
  constexpr int RT = C::RT, MT = C::MT, kStages = C::Stages, nwarps = C::Warps;
  using Side = typename F::template Side<RT>;
  extern __shared__ uint4 xs_dyn[];  // XS: the row, staged_values<F>(k) values of T
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * (kRowTile * RT);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * (kXTile * MT);
  // x in shared memory, 4-bit formats: a granule's words lie 4 vectors apart (staged_index)
  constexpr int XJ = XS && F::kPairs04 ? 32 : 8;
  Ctx<T, RT, MT, XS, XJ> c;
  c.g = lane >> 2;
  c.t = lane & 3;
  // Constants ptxas cannot see as such (p.k >= 0): kept in registers instead of being
  // re-materialized before every nibble-decoding LOP3 (measured: one IMAD.MOV per LOP3).
  const std::uint32_t opaque = static_cast<std::uint32_t>(p.k < 0 ? p.k : 0);
  c.i4lo = Bits4<T>::kI4XorLo | opaque;
  c.i4hi = Bits4<T>::kI4XorHi | opaque;
  c.granules = static_cast<int>(p.k / F::kElems);
  c.steps = (c.granules + 3) / 4;
  // The lane's first granule and the granules between its steps: each stream (W issued ahead,
  // x and the granule bound at the math) walks by that stride, no index arithmetic per step.
  const int g0 = warp * 4 + c.t;
  constexpr int kStride = 4 * nwarps;
  const T* x = XS ? reinterpret_cast<const T*>(xs_dyn) : static_cast<const T*>(p.x);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const std::int64_t m = m0 + kXTile * mt + c.g;
    const bool xok = m < p.m;
    if constexpr (!XS) c.xleft[mt] = xok ? c.granules - g0 : 0;  // XS: xvalid needs no count
    // staged_index of the lane's first granule, word 0: 16 warp + t vectors (4-bit, XS)
    const int first = XJ == 32 ? (16 * warp + c.t) * 8 : g0 * F::kElems;
    c.xcur[mt] = x + (xok && !XS ? m * p.sx : 0) + first;
  }
  const unsigned char* wrow[RT][2];  // the thread's rows of W
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::int64_t n;
      bool wok;
      if constexpr (Gated) {  // n0 / 2 + 8 r + g < I, its gate row or its up row
        const std::int64_t o = n0 / 2 + 8 * r + c.g;
        wok = o < p.n / 2;
        n = o + h * (p.n / 2);
      } else {
        n = n0 + kRowTile * r + 8 * h + c.g;
        wok = n < p.n;
      }
      const std::int64_t row = wok ? n : 0;
      wrow[r][h] = p.w + row * p.sw;
      c.snext[r][h] = static_cast<const unsigned char*>(p.scales) + row * p.ss * F::kScaleBytes +
                      F::scale_offset(warp, c.t);
    }
  }
  const int steps = c.steps;

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
  // held for them; the scales are prefetched one step ahead in registers. The slots are
  // addressed by 32-bit shared-memory addresses held in registers (kSlot bytes a stage,
  // kRowSlot a W row): indexing the array every step cost the loop a dozen instructions.
  __shared__ uint4 ring[nwarps][kStages][RT * 2][32];
  constexpr unsigned kRowSlot = 32 * 16, kSlot = RT * 2 * kRowSlot;
  const unsigned ring0 = smem_addr(&ring[warp][0][0][lane]);
  const unsigned ring_last = ring0 + (kStages - 1) * kSlot;
  // The W stream: wnext[r][h] is the address of granule gnext of the row while that lies
  // inside K; past K nothing is read (zero fill) and the address stays on the row's last
  // granule issued. Loop-carried pointers: ptxas recomputed row * stride every step otherwise.
  int gnext = g0;
  const unsigned char* wnext[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) wnext[r][h] = wrow[r][h] + (g0 < c.granules ? g0 * 16 : 0);
  }
  const auto issue = [&](unsigned slot) {
    const bool ok = gnext < c.granules;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) cp_async16_to(slot + (r * 2 + h) * kRowSlot, wnext[r][h], ok);
    }
    gnext += kStride;
    const int advance = gnext < c.granules ? kStride * 16 : 0;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) wnext[r][h] += advance;
    }
  };
  Side side, nside;
  start(p, [&] {
#pragma unroll
    for (int j = 0; j < kStages - 1; ++j) {
      issue(ring0 + j * kSlot);
      cp_async_commit();
    }
    side.load(p, c, warp);
    c.template next_scales<F, nwarps>();
  });
  if constexpr (Norm) {
    norm_row<T, F>(p, reinterpret_cast<T*>(xs_dyn));
  } else if constexpr (XS) {
    stage_row<T, F>(p, reinterpret_cast<T*>(xs_dyn));
  }
  unsigned rd = ring0, wr = ring_last;  // the slot computed this step, the slot issued into
  for (int s = warp; s < steps; s += nwarps) {
    nside.load(p, c, s + nwarps);  // zeros past the end
    c.template next_scales<F, nwarps>();
    issue(wr);  // the slot read last step
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this step's group has landed
    uint4 w[RT][2];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) w[r][h] = lds128(rd + (r * 2 + h) * kRowSlot);
    }
    F::template step<T, RT, MT>(c, w, side, acc);
    side = nside;
    wr = rd;
    rd = rd == ring_last ? ring0 : rd + kSlot;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      c.xcur[mt] += kStride * F::kElems;
      if constexpr (!XS) c.xleft[mt] -= kStride;
    }
  }
  cp_async_wait<0>();
  // C value e of row tile r and x tile mt: W row (output column) g or g + 8 (e >> 1), x row 2t
  // or 2t + 1 (e & 1). Gated: the gate value (e < 2) of output column n0 / 2 + 8 r + g, whose up
  // value is e + 2 (kUp); the up values get a column past I, so they are not stored.
  if constexpr (Gated) {
    epilogue<T, F, nwarps, 2>(p, acc, [m0, n0, rows = p.n](int i, int l, std::int64_t& m,
                                                           std::int64_t& n) {
      const int e = i & 3, mt = (i >> 2) % MT, r = (i >> 2) / MT;
      n = (e >> 1) ? rows : n0 / 2 + 8 * r + (l >> 2);
      m = m0 + kXTile * mt + 2 * (l & 3) + (e & 1);
    });
  } else {
    epilogue<T, F, nwarps>(p, acc, [m0, n0](int i, int l, std::int64_t& m, std::int64_t& n) {
      const int e = i & 3, mt = (i >> 2) % MT, r = (i >> 2) / MT;
      n = n0 + kRowTile * r + (l >> 2) + (e >> 1) * 8;
      m = m0 + kXTile * mt + 2 * (l & 3) + (e & 1);
    });
  }
}

template <typename T, typename F, typename C, bool Gated = false, XFrom Xf = XFrom::global>
void launch_config(const GemvArgs& a, const char* name) {
  if (a.m == 0 || a.n == 0) return;
  const Params p = make_params(a);
  constexpr int rows = kRowTile * C::RT, xrows = kXTile * C::MT;
  const dim3 grid(static_cast<unsigned>((a.n + rows - 1) / rows),
                  static_cast<unsigned>((a.m + xrows - 1) / xrows));
  use_device(a.device);
  const auto kernel = gemv_wa_kernel<T, F, C, Gated, Xf>;
  constexpr bool XS = Xf != XFrom::global;
  const int smem = XS ? static_cast<int>(staged_values<F>(a.k) * sizeof(T)) : 0;
  if (XS) {
    check(allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem), name, __FILE__,
          __LINE__);
  }
  check(launch_kernel_smem(kernel, grid, dim3(C::Warps * 32), static_cast<std::size_t>(smem),
                           as_stream(a.stream), a.pdl, p),
        name, __FILE__, __LINE__);
}

// Up to 8 rows of x (decoding), by blocks of one row tile (16 output columns): under 256 of them
// one row tile a block and 16 warps, under 512 8 warps, under 1024 4 warps; from 1024 (N >=
// 16369) the format's F::Wide, and F::Wider from F::kWiderFrom blocks (int4: one row tile of 4
// warps with a 64-register cap (MinBlocks 8: 0.95x the uncapped time at 1536-1848 blocks), two
// row tiles from 4096 blocks; nvfp4 and fp8 with block scales: one row tile of 4 or
// 8 warps; per-channel fp8: two row tiles of 4 warps). Two ring stages. Measured on an H200
// against the other configurations (benchmarks/tuning/gemv_configs.sh, BENCHMARKS.md "GEMV"):
// within 5% of the fastest configuration of each format at every shape timed, except int4 at
// 9496 blocks (one row tile 1.08x; two take over from 4096, a bound not measured between 1848
// and 9496). More stages were slower or level. More rows of x: two row tiles, two x tiles (W
// is read once per 16 rows of x, as in gemv_kernel.cuh), 4 warps from 256 blocks, else 8.
//
// The gated product (a.gated) takes the same rule up to 8 rows (its W is as large as a plain
// one of n rows); beyond, where it serves batched decode up to QGEMV_MAX_ROWS rows, one
// configuration (two row tiles, two x tiles, 4 warps) keeps its instantiations few.
//
// The RMSNorm form (one row) takes the rule of up to 8 rows (launch_few_rows).
//
// One row of x staged in shared memory (XFrom::shared) where the format asks for it: at
// F::kStageFromBlocks to F::kStageToBlocks - 1 blocks up to F::kStageMaxK values of K (none
// where the range is empty), with the few-rows rule's configuration. Measured on an H200 at
// M = 1 against x read in the loop (BENCHMARKS.md "GEMV"): nvfp4, whose loop is the longest,
// took 0.89-0.95x the time at 896-9496 blocks (K 2048-8192), 0.99-1.00x at 256 (K
// 12288-16384) and 1.07-1.09x at 128-192, where the copy before the first product is not
// hidden behind other blocks. int4, with x in a bank-conflict-free order (staged_index), gains
// at 512-1023 blocks up to K 4096 only (see Int4); fp8 took 0.94-1.34x (1.34x at K 8192 N 29568, 16
// KiB of x a block: fewer blocks a multiprocessor is the likely cause, not profiled), so it
// reads x in the loop.
//
// FromBlocks, ToBlocks: the caller launches only from FromBlocks blocks and below ToBlocks
// (the staged row: F::kStageFromBlocks, F::kStageToBlocks), so the configurations outside are
// not instantiated.
template <typename T, typename F, bool Gated, XFrom Xf = XFrom::global,
          std::int64_t FromBlocks = 0, std::int64_t ToBlocks = kNoBlockLimit>
void launch_few_rows(const GemvArgs& a, const char* name) {
  const std::int64_t nblk = (a.n + kRowTile - 1) / kRowTile;
  if constexpr (FromBlocks < 256) {
    if (nblk < 256) {
      launch_config<T, F, Config<1, 1, 16, 2>, Gated, Xf>(a, name);
      return;
    }
  }
  if constexpr (FromBlocks < 512) {
    if (nblk < 512) {
      launch_config<T, F, Config<1, 1, 8, 2>, Gated, Xf>(a, name);
      return;
    }
  }
  if constexpr (ToBlocks > 1024) {
    if (nblk >= 1024) {
      if (nblk < F::kWiderFrom) {
        launch_config<T, F, typename F::Wide, Gated, Xf>(a, name);
      } else {
        launch_config<T, F, typename F::Wider, Gated, Xf>(a, name);
      }
      return;
    }
  }
  launch_config<T, F, Config<1, 1, 4, 2>, Gated, Xf>(a, name);
}

// Past a full first wave of blocks the last wave leaves most multiprocessors with a block or two,
// each with 4 warps and two ring stages in flight: too few bytes in flight to keep DRAM busy.
// There a format may take Tail: one row of x staged, one row tile of 4 warps and a third ring
// stage (its shared memory also holds a multiprocessor to 9 blocks at K 4096, a shorter first
// wave and a fuller last one), at F::kTailFromBlocks to F::kTailToBlocks - 1 blocks, K
// F::kTailMinK to F::kTailMaxK, one row of bfloat16 x (the type it was timed in); the gated
// product only where F::kTailGated. Same warps, same K split: the same bits as the launch it
// replaces. Measured on an H200 (BENCHMARKS.md "GEMV"): nvfp4's plain product, whose x is staged
// there anyway, took 0.90-0.98x the time at 1376-1848 blocks (the likely cause above, not
// profiled). int4 gained alone too but lost in the decode step, where staging x holds its early
// launch back (Int4).
using Tail = Config<1, 1, 4, 3>;

// Whether the product has one row of x, from_blocks to to_blocks - 1 blocks of 16 output columns
// and min_k to max_k values of K: the ranges of Tail and of the staged row.
inline bool one_row_within(const GemvArgs& a, std::int64_t from_blocks, std::int64_t to_blocks,
                           std::int64_t min_k, std::int64_t max_k) {
  const std::int64_t nblk = (a.n + kRowTile - 1) / kRowTile;
  return a.m == 1 && a.k >= min_k && a.k <= max_k && nblk >= from_blocks && nblk < to_blocks;
}

template <typename T, typename F, bool Gated>
void launch_rule(const GemvArgs& a, const char* name) {
  if constexpr (F::kTailToBlocks > F::kTailFromBlocks && (!Gated || F::kTailGated) &&
                std::is_same_v<T, __nv_bfloat16>) {
    if (one_row_within(a, F::kTailFromBlocks, F::kTailToBlocks, F::kTailMinK, F::kTailMaxK)) {
      launch_config<T, F, Tail, Gated, XFrom::shared>(a, name);
      return;
    }
  }
  if constexpr (F::kStageToBlocks > F::kStageFromBlocks) {
    if (one_row_within(a, F::kStageFromBlocks, F::kStageToBlocks, 0, F::kStageMaxK)) {
      launch_few_rows<T, F, Gated, XFrom::shared, F::kStageFromBlocks, F::kStageToBlocks>(a,
                                                                                       name);
      return;
    }
  }
  if (a.m <= kXTile) {
    launch_few_rows<T, F, Gated>(a, name);
    return;
  }
  constexpr int RT = 2;
  const std::int64_t nblk = (a.n + kRowTile * RT - 1) / (kRowTile * RT);
  const std::int64_t mblk = (a.m + 2 * kXTile - 1) / (2 * kXTile);
  if constexpr (Gated) {
    launch_config<T, F, Config<RT, 2, 4, 2>, true>(a, name);
  } else if (nblk * mblk >= 256) {
    launch_config<T, F, Config<RT, 2, 4, 2>>(a, name);
  } else {
    launch_config<T, F, Config<RT, 2, 8, 2>>(a, name);
  }
}

template <typename T, typename F>
void launch(const GemvArgs& a, const char* name) {
  if (a.gated) {
    launch_rule<T, F, true>(a, name);
  } else if (a.norm) {  // one row (check_common)
    launch_few_rows<T, F, false, XFrom::norm>(a, name);
  } else {
    launch_rule<T, F, false>(a, name);
  }
}

}  // namespace wa
}  // namespace gemv_detail
}  // namespace pgk
