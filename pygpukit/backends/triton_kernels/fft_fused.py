"""The one-kernel FFT of fft.py for lengths n = N1 N2 with both factors <= 64 (every length up
to 64, and the smooth lengths up to 4096: 400 = 16 x 25, 512, 1000, 2048, 4096 = 64 x 64), and
for an rfft of even n whose half is such a length (8192, through real pairs below).

Why: the Stockham passes of fft.py read and write the whole signal once per pass through global
scratch (two or three passes for the lengths of speech frames, 3x the minimum traffic, plus a
launch each). Here one program holds ROWS whole rows on chip, does both DFT products in
registers and shared memory, and writes each output once: one read of the input and one write
of the result, the minimum.

Index mapping (the four-step split, Van Loan 1.7 / Bailey 1990): input j = N2 j1 + j2 (j1 < N1,
j2 < N2), output k = k1 + N1 k2 (k1 < N1, k2 < N2). With w_m = exp(-2 pi i / m),

    X[k1 + N1 k2] = sum_j2 w_N2^(j2 k2) w_n^(j2 k1) sum_j1 w_N1^(j1 k1) x[N2 j1 + j2]

since w_n^((N2 j1 + j2)(k1 + N1 k2)) = w_N1^(j1 k1) w_n^(j2 k1) w_N2^(j2 k2) (the j1 k2 term
is w_n^(n j1 k2) = 1). A program:
  1. loads its rows as a [ROWS, N2P, N1P] tile A[r, j2, j1] = x[r, N2 j1 + j2] (j2 is the
     contiguous direction in memory; each factor padded to a power of two >= 16, tl.dot's
     smallest tile, by masking; real input loads only the real part, irfft reads its
     Hermitian half and mirrors e >= n // 2 + 1 as conj(x[n - e]) as fft.py does);
  2. B = A @ F1 with the rows stacked along M: [ROWS N2P, N1P] x [N1P, N1P] (F1[j1, k1] =
     w_N1^(j1 k1), symmetric; a complex product is four real tl.dot, two for real input);
  3. B[r, j2, k1] *= W[j2, k1] = w_n^(j2 k1) (one table, [N2P, N1P], shared by the rows);
  4. permutes B to [ROWS, N1P, N2P] (a layout change on chip) and takes D = B @ F2: [ROWS N1P,
     N2P] x [N2P, C], D[r, k1, k2] = X[r, k1 + N1 k2];
  5. stores D at k1 + N1 k2 (masked to k < n_out), the norm scale applied in the store.
With N2 = 1 (n <= 64) steps 3 and 4 vanish: one product [ROWS, N1P] x [N1P, C].

What the call reads and writes trims the work (fft_plan.fused_split picks N1, N2 to minimise
the padded multiply-adds): real input halves step 2; irfft stores only real parts, halving
step 4; rfft needs only k <= n / 2, so step 4 computes the columns k2 < C with C the padded
count of needed columns, and when the last needed column holds only X[n / 2] (N2 even) that
term is the separate sum (-1)^j x[j] and C halves (2048 = 32 x 64: 32 columns instead of
64).

Real pairs (fft_plan.real_pairs: rfft 1000, 2048, 4096, 8192): an rfft of even n whose real
transform pads a factor to 64 runs as the complex n / 2-point transform Z of z[j] = x[2 j] + i
x[2 j + 1] (LOAD 3), stored unscaled into the output row, then rewritten in place into X by
fft_real.untangle_rows (X[k] from Z[k] and conj(Z[n / 2 - k])). The reversed index across a
padded tile is a gather Triton cannot do in registers, so it goes through the output row
itself: a CTA barrier makes the program's stores visible, and each lane then reads and writes
one pair (k, n/2 - k), so the rewrite needs no further barrier; the re-read hits L2. 2048
becomes a 32 x 32 complex tile (no factor of 64): 6.1x faster on an H100 (fft_plan.real_pairs).

Chunks (with "ieee" products; CHUNKS, measured below): a factor padded to 64 (2048 = 32 x 64,
4096 = 64 x 64, 1000 = 20 x 50 -> 32 x 64, n in 33..64 with N2 = 1) is cut into chunks of 16
on every side of both products.
Triton cannot slice a register tensor, so the chunks are cut where they are made: input
chunks A[r, j2 chunk, j1 chunk] and table chunks F[j chunk, k chunk] are separate loads, and
the kernel runs, per k1 chunk (step 2's rows), over the j2 chunks: step 1 for that chunk (its
K = j1 summed chunk by chunk, acc = dot(a_c, f_c, acc)), the twiddles, and the chunk's share
of step 2 (K = j2) accumulated into D[r, k1 chunk, all columns], stored once the j2 chunks are
done. The multiply-adds are those of the whole products; a program holds one chunk of A and
B and one accumulator at a time instead of the whole tile, and re-reads its input (from L1)
once per k1 chunk. The chunk loops are tl.range loops, not unrolled (num_stages=1): unrolled,
ptxas hoisted every chunk's loads and still spilled (0.2 to 2 KB). Why: Triton's FMA tl.dot
("ieee") keeps a thread's rows of A and columns of B for the whole K in registers, and below
M = 64 tf32x3 runs as mma.sync with both operands, hi and lo parts, in registers, replicated
over the warps; K = 64 operands overflowed the 255 registers. ptxas -v for sm_90a
(benchmarks/tuning/fft_regs.py, 96000 rows, one row and 8 warps a program), spill stores in
bytes a thread, whole products -> chunks: ieee rfft 1000 540 -> 0, fft 1000 476 -> 0, rfft
2048 532 -> 0, fft 2048 6928 -> 0, rfft 4096 828 -> 0, fft 4096 38568 -> 8; tf32x3 rfft 1000
780 -> 0, fft 1000 0 -> 8, rfft 2048 776 -> 0, fft 2048 0 -> 0, rfft 4096 368 -> 0, fft 4096
544 -> 0 (127 to 254 registers after; irfft / ifft alike, at most 8 bytes). Factors padded to
32 or less are not cut (CHUNK_OVER): 400 and 512 need no chunks to be spill-free, and their
H100 numbers below are with whole products. Still spilling: n = 64 with tf32x3 at 32 rows a
program (fft: 44 bytes; none at 16 rows). Measured on an H100 (96000 rows, 2026-11-26,
benchmarks/fft.py --chunk 64 16 --points 2048 4096): with "ieee" the chunks removed the
spills' collapse (fft 4096: 367 ms whole, 24.8 ms in chunks; rfft 2048 at 4096 points: 74.3
ms -> 4.8 ms), but with "tf32x3" whole products stayed faster (rfft 2048: 4.5 ms whole at 4096
points, 7.4 ms in chunks; rfft 4096: 12.0 vs 33.8 ms; fft 2048: 5.5 vs 5.3 ms), so tf32x3,
the default, keeps whole products (CHUNKS). These lengths remain at 0.04x to 0.2x of cuFFT:
the next step is a third factor (three on-chip steps of radix <= 32).

Rows per program: a program's tile is ROWS N1P N2P points, ROWS = POINTS[DOT] / (N1P N2P),
at least 1, at least 16 when N2 = 1 (tl.dot's M >= 16), and no more than the rows there are;
4 warps, 8 for a row of 2048 or more padded points (FUSED_WARPS overrides). POINTS is 1024 for
"ieee" and 2048 for "tf32x3", first from ptxas's register counts of the sm_90 build, then
confirmed by benchmarks/fft.py --points on an H100 (96000 rows, 2026-11-26: tf32x3 rfft n=400
at 512/1024/2048/4096 points took 794/442/278/325 us, fft n=512 738/889/551/657 us; ieee fft
n=400 981/753/925/24958 us, the last spilling). Why: at 2048 points and 4 warps the fp32
FMA products of 400 and 512 (16 x 32 tiles) spill 0.5 KB a thread, at 1024 points they take
~185 registers and none; tf32x3 at M >= 64 goes through wgmma (B in shared memory) and needs
no spill at 2048 points (~140 registers). Tiles with a factor padded to 64 take WIDE_POINTS
(tf32x3: 8192) instead: on an H100 (96000 rows, 2026-11-27, benchmarks/fft.py --dot tf32x3
--points 2048 4096 8192 --pairs 1 0) fft 1000 / 2048 / 4096 took 5179 / 5561 / 19520 us at
2048 points, 6685 / 7056 / 19495 at 4096 and 3344 / 4250 / 11306 at 8192, and rfft 4096
(through real pairs, a 32 x 64 tile) 6760 / 8433 / 5510; the 32 x 32 tiles of rfft 1000 and
2048 through pairs were fastest at 2048 points (1203 and 1528 us; 4210 and 6304 at 8192).
Under the interpreter, whose cost is per program, tiles are larger.

Precision: every FFT tl.dot takes input_precision from DOT (env PYGPUKIT_FFT_DOT): "tf32x3"
(the default: three TF32 tensor-core products, hi*hi + hi*lo + lo*hi, fp32-level accuracy:
1.7e-7 to 2.9e-7 relative to float64 on the H100 for n = 400, 512, 2048, 4.2e-7 through
Bluestein at 401) or "ieee" (fp32 FMA products, 1.4e-7 to 2.1e-7, slower: rfft n=400 took
399 us at its best against tf32x3's 278, fft n=512 776 against 551). Both are fp32 results
within the 1e-5 contract; tf32x3 is not the single-TF32 mode (1e-3), which no FFT here uses.
The interpreter computes both as fp32 matmuls.
"""

# Triton kernel and @triton.jit function bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import os
from dataclasses import dataclass

import triton
import triton.language as tl

from pygpukit.array import GPUArray
from pygpukit.backends.triton_kernels import interpreting
from pygpukit.backends.triton_kernels._common import cdiv, next_pow2, row_offset
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.fft_plan import (
    RMAX,
    fused,
    fused_split,
    out_cols,
    padded,
    real_pairs,
    untangle,
)
from pygpukit.backends.triton_kernels.fft_real import power_of, sample, untangle_rows

__all__ = [
    "CHUNK",
    "CHUNKS",
    "CHUNK_OVER",
    "DOT",
    "DOTS",
    "FUSED",
    "FUSED_POINTS",
    "FUSED_WARPS",
    "POINTS",
    "WIDE_POINTS",
    "Operand",
    "fusable",
    "fused_cfg",
    "fused_transform",
    "mm",
    "tf32x3",
    "uses_pairs",
]

DOTS = ("ieee", "tf32x3")
DOT = os.environ.get("PYGPUKIT_FFT_DOT", "tf32x3")
# The fused path on (1) or off (0: every length through fft.py's passes, for comparison).
FUSED = os.environ.get("PYGPUKIT_FFT_FUSED", "1") != "0"
# Points a program by DOT variant (module docstring); FUSED_POINTS, when set, overrides;
# FUSED_WARPS, when set, overrides the warps a program (fused_cfg).
POINTS = {"ieee": 1024, "tf32x3": 2048}
WIDE_POINTS = {"ieee": 1024, "tf32x3": 8192}
FUSED_POINTS: int | None = None
FUSED_WARPS: int | None = None
_INTERPRET_POINTS = 16384
# The chunk width of every product along a factor padded past CHUNK_OVER (module docstring:
# a factor padded to 64 is cut into chunks, each loaded apart; 64 cuts nothing), by DOT
# variant as measured on an H100; CHUNK, when set, overrides (benchmarks/fft.py --chunk).
CHUNKS = {"ieee": 16, "tf32x3": 64}
CHUNK: int | None = None
CHUNK_OVER = 32

# How the input is read (fft.py's names): complex pairs, real values, the Hermitian half; and
# real values read as complex pairs x[2 j] + i x[2 j + 1] (the rfft through real_pairs).
_COMPLEX, _REAL, _HERMITIAN, _PAIRS = 0, 1, 2, 3
# rfft of the even lengths fft_plan.real_pairs picks as a complex half-length transform and an
# untangling step (1) or always as a real transform (0, for comparison): PYGPUKIT_FFT_PAIRS.
PAIRS = os.environ.get("PYGPUKIT_FFT_PAIRS", "1") != "0"
# Output pairs (k, n / 2 - k) a chunk of the untangling step rewrites.
UNTANGLE_BLOCK = 256


def tf32x3() -> bool:
    """True when DOT selects "tf32x3" (checked on every launch, so DOT may be set at run time)."""
    if DOT not in DOTS:
        raise ValueError(f"PYGPUKIT_FFT_DOT / fft_fused.DOT must be one of {DOTS}, not {DOT!r}")
    return DOT == "tf32x3"


@dataclass
class Operand:
    """An fp32 view and its row addressing (row strides s0..s2 over the shared D1, D2, element
    stride se), in units of its element type (fp32 for complex, two per value)."""

    a: GPUArray
    s: tuple[int, int, int]
    se: int


@triton.jit
def mm(a, b, TF32X3: tl.constexpr):
    """a @ b in fp32: FMA ("ieee") or three TF32 tensor-core products ("tf32x3")."""
    if TF32X3:
        c = tl.dot(a, b, input_precision="tf32x3")
    else:
        c = tl.dot(a, b, input_precision="ieee")
    return c


@triton.jit
def _store(Y, POST, yo, k, mask, yr, yi, scale, HAS_POST: tl.constexpr, REAL_OUT: tl.constexpr,
           POWER: tl.constexpr = 0):  # fmt: skip
    """Store output values k at offsets yo (times POST[k], a chirp, and the norm scale); only
    the real part when REAL_OUT; |X| ** POWER (one real value) when POWER is 1 or 2."""
    if HAS_POST:
        qr = tl.load(POST + 2 * k, mask=mask, other=0.0)
        qi = tl.load(POST + 2 * k + 1, mask=mask, other=0.0)
        yr, yi = yr * qr - yi * qi, yr * qi + yi * qr
    if POWER != 0:
        tl.store(Y + yo, power_of(yr * scale, yi * scale, POWER), mask=mask)
    else:
        tl.store(Y + yo, yr * scale, mask=mask)
        if not REAL_OUT:
            tl.store(Y + yo + 1, yi * scale, mask=mask)


@triton.jit
def _load(X, PRE, WIN, xrow, rok, j2o, j1o, n_in, n_log, sxe, fstart, n_sig,
          N1: tl.constexpr, N2: tl.constexpr, Q2: tl.constexpr, Q1: tl.constexpr,
          ROWS: tl.constexpr, LOAD: tl.constexpr, HAS_PRE: tl.constexpr, HAS_WIN: tl.constexpr,
          NYQ: tl.constexpr, PADMODE: tl.constexpr):  # fmt: skip
    """The input chunk A[r, j2, j1] = x[r, N2 j1 + j2] for j2 in j2o + [0, Q2), j1 in j1o +
    [0, Q1) (masked past N2, N1), as (xr, xi) (xi zero for real input), times WIN[e] (a real
    window, when HAS_WIN), and its share of the Nyquist sum (-1)^e x[e] when NYQ. Real input
    (LOAD 1 or 3) may be a frame of a padded signal (PADMODE, fft_real.sample)."""
    j2 = j2o + tl.arange(0, Q2)
    j1 = j1o + tl.arange(0, Q1)
    e = (j2[:, None] + N2 * j1[None, :])[None, :, :]
    tile = ((j2 < N2)[:, None] & (j1 < N1)[None, :])[None, :, :]
    ok = rok[:, None, None] & tile
    if LOAD == 3:  # real pairs: z[e] = x[2 e] + i x[2 e + 1] (n_in, n_log count real values)
        xr = sample(X, xrow, fstart, 2 * e, ok & (2 * e < n_in), sxe, n_sig, PADMODE)
        xi = sample(X, xrow, fstart, 2 * e + 1, ok & (2 * e + 1 < n_in), sxe, n_sig, PADMODE)
        if HAS_WIN:
            wok = tile & (2 * e + 1 < n_log)
            xr = xr * tl.load(WIN + 2 * e, mask=wok, other=0.0).to(tl.float32)
            xi = xi * tl.load(WIN + 2 * e + 1, mask=wok, other=0.0).to(tl.float32)
    else:
        if LOAD == 2:
            mirrored = e >= n_log // 2 + 1
            src = tl.where(mirrored, n_log - e, e)
            ok_in = ok & (e < n_log) & (src < n_in)
        else:
            src = e
            ok_in = ok & (e < n_in)
        xo = xrow[:, None, None] + src.to(tl.int64) * sxe
        if LOAD == 1:
            xr = sample(X, xrow, fstart, src, ok_in, sxe, n_sig, PADMODE)
            xi = tl.zeros_like(xr)
        else:
            xr = tl.load(X + xo, mask=ok_in, other=0.0).to(tl.float32)
            xi = tl.load(X + xo + 1, mask=ok_in, other=0.0).to(tl.float32)
            if LOAD == 2:
                xi = tl.where(mirrored, -xi, xi)
        if HAS_WIN:  # the STFT's window, one fp32 product as the separate multiply rounded
            w = tl.load(WIN + e, mask=tile & (e < n_log), other=0.0).to(tl.float32)
            xr = xr * w
            xi = xi * w
    if HAS_PRE:  # Bluestein's chirp or Bhat, indexed by the logical element
        pok = tile & (e < n_log)
        pr = tl.load(PRE + 2 * e, mask=pok, other=0.0)
        pi = tl.load(PRE + 2 * e + 1, mask=pok, other=0.0)
        xr, xi = xr * pr - xi * pi, xr * pi + xi * pr
    if NYQ:
        sign = tl.where(e % 2 == 0, 1.0, -1.0)
        nr = tl.sum(tl.sum(xr * sign, axis=2), axis=1)
        ni = tl.sum(tl.sum(xi * sign, axis=2), axis=1)
    else:
        nr = tl.zeros([ROWS], tl.float32)  # unused
        ni = nr
    return xr, xi, nr, ni


@triton.jit
def _cmm(ar, ai, F, fo, fplane, acr, aci, REAL_A: tl.constexpr, REAL_ONLY: tl.constexpr,
         INVERSE: tl.constexpr, TF32X3: tl.constexpr):  # fmt: skip
    """(acr, aci) += (ar + i ai) @ F[fo] (F: [2, ...] planes fplane apart, conjugated when
    INVERSE); ai is zero when REAL_A; only the real part when REAL_ONLY."""
    fr = tl.load(F + fo)
    fi = tl.load(F + fplane + fo)
    if INVERSE:
        fi = -fi
    if REAL_A:
        acr += mm(ar, fr, TF32X3)
        if not REAL_ONLY:
            aci += mm(ar, fi, TF32X3)
    else:
        acr += mm(ar, fr, TF32X3) - mm(ai, fi, TF32X3)
        if not REAL_ONLY:
            aci += mm(ar, fi, TF32X3) + mm(ai, fr, TF32X3)
    return acr, aci


@triton.jit
def _step1(X, PRE, WIN, F1, TW, xrow, rok, j2o, k1o, n_in, n_log, sxe, fstart, n_sig,
           N1: tl.constexpr, N2: tl.constexpr, N1P: tl.constexpr, N2P: tl.constexpr,
           Q1: tl.constexpr, Q2: tl.constexpr, H1: tl.constexpr, ROWS: tl.constexpr,
           LOAD: tl.constexpr, REAL_X: tl.constexpr, HAS_PRE: tl.constexpr,
           HAS_WIN: tl.constexpr, NYQ: tl.constexpr, INVERSE: tl.constexpr,
           TF32X3: tl.constexpr, PADMODE: tl.constexpr):  # fmt: skip
    """The chunk j2 in j2o + [0, Q2), k1 in k1o + [0, Q1) of B = (A @ F1) * W as [ROWS, Q1,
    Q2] tiles (k1 before j2: step 2's layout): the K = N1P sum over the H1 chunks of j1, each
    loaded apart; and, when NYQ, the loaded chunks' share of the Nyquist sum."""
    j = tl.arange(0, Q1)
    br = tl.zeros([ROWS * Q2, Q1], tl.float32)
    bi = br
    nr = tl.zeros([ROWS], tl.float32)
    ni = nr
    for jc in tl.range(0, H1, num_stages=1):
        xr, xi, pr, pi = _load(X, PRE, WIN, xrow, rok, j2o, jc * Q1, n_in, n_log, sxe, fstart,
                               n_sig, N1, N2, Q2, Q1, ROWS, LOAD, HAS_PRE, HAS_WIN, NYQ,
                               PADMODE)  # fmt: skip
        if NYQ:
            nr += pr
            ni += pi
        fo = (jc * Q1 + j)[:, None] * N1P + (k1o + j)[None, :]
        br, bi = _cmm(tl.reshape(xr, (ROWS * Q2, Q1)), tl.reshape(xi, (ROWS * Q2, Q1)), F1, fo,
                      N1P * N1P, br, bi, REAL_X, False, INVERSE, TF32X3)  # fmt: skip
    # Twiddles W[j2, k1] = w_n^(j2 k1), shared by the rows.
    to = (j2o + tl.arange(0, Q2))[:, None] * N1P + (k1o + j)[None, :]
    tr = tl.load(TW + to)[None, :, :]
    ti = tl.load(TW + N2P * N1P + to)[None, :, :]
    if INVERSE:
        ti = -ti
    br = tl.reshape(br, (ROWS, Q2, Q1))
    bi = tl.reshape(bi, (ROWS, Q2, Q1))
    br, bi = br * tr - bi * ti, br * ti + bi * tr
    return tl.permute(br, (0, 2, 1)), tl.permute(bi, (0, 2, 1)), nr, ni


@triton.jit
def _fft_fused(
    X, Y, F1, F2, TW, PRE, POST, WIN, UT,
    n_rows, D1, D2, sx0, sx1, sx2, sxe, sy0, sy1, sy2, sye,
    n_in, n_log, n_out, scale, hop, pad, n_sig,
    N1: tl.constexpr, N2: tl.constexpr, N1P: tl.constexpr, N2P: tl.constexpr,
    Q1: tl.constexpr, Q2: tl.constexpr, C: tl.constexpr, QC: tl.constexpr,
    ROWS: tl.constexpr, LOAD: tl.constexpr, REAL_X: tl.constexpr, PADMODE: tl.constexpr,
    REAL_OUT: tl.constexpr, NYQ: tl.constexpr, HAS_PRE: tl.constexpr, HAS_POST: tl.constexpr,
    HAS_WIN: tl.constexpr, INVERSE: tl.constexpr, TF32X3: tl.constexpr,
    UNTANGLE: tl.constexpr, UB: tl.constexpr, POWER: tl.constexpr,
):  # fmt: skip
    """The whole n = N1 N2 point transform of ROWS rows (see the module docstring), in chunks
    of Q1 (j1, k1) and Q2 (j2), and QC output columns with N2 = 1. Offsets
    are in units of the operands' element type, a complex value being the pair (o, o + 1).
    With PADMODE (1 to 4; rfft_frames passes constant for pad 0) the rows are frames
    f = r % D2 of signals of n_sig samples padded by pad (frame f starts at sample f hop - pad;
    sx2 is then 0); PADMODE 0 reads plain rows."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rok = r < n_rows
    xrow = row_offset(r, D1, D2, sx0, sx1, sx2)
    fstart = (r % D2) * hop - pad
    yrow = row_offset(r, D1, D2, sy0, sy1, sy2)
    H1: tl.constexpr = N1P // Q1
    H2: tl.constexpr = N2P // Q2
    real_only: tl.constexpr = REAL_OUT and not HAS_POST
    # With UNTANGLE the products give Z (stored unscaled into Y[0, M)), rewritten below.
    s1 = 1.0 if UNTANGLE else scale
    P1: tl.constexpr = 0 if UNTANGLE else POWER
    nr = tl.zeros([ROWS], tl.float32)
    ni = nr
    if N2 == 1:
        # One product [ROWS, N1P] x [N1P, C]: K chunks of Q1 loaded apart, columns in QC.
        j = tl.arange(0, Q1)
        for cc in tl.static_range(C // QC):
            kc = cc * QC + tl.arange(0, QC)
            br = tl.zeros([ROWS, QC], tl.float32)
            bi = br
            for jc in tl.static_range(H1):
                xr, xi, pr, pi = _load(X, PRE, WIN, xrow, rok, 0, jc * Q1, n_in, n_log, sxe,
                                       fstart, n_sig, N1, N2, 1, Q1, ROWS, LOAD, HAS_PRE,
                                       HAS_WIN, NYQ and cc == 0, PADMODE)  # fmt: skip
                if NYQ and cc == 0:
                    nr += pr
                    ni += pi
                fo = (jc * Q1 + j)[:, None] * N1P + kc[None, :]
                br, bi = _cmm(tl.reshape(xr, (ROWS, Q1)), tl.reshape(xi, (ROWS, Q1)), F1, fo,
                              N1P * N1P, br, bi, REAL_X, real_only, INVERSE, TF32X3)  # fmt: skip
            k = kc[None, :]
            mask = rok[:, None] & (k < N1) & (k < n_out)
            _store(Y, POST, yrow[:, None] + k.to(tl.int64) * sye, k, mask, br, bi, s1,
                   HAS_POST, REAL_OUT, P1)  # fmt: skip
    else:
        # Per chunk of k1 (step 2's rows): step 1 per chunk of j2, each chunk's share of
        # D = B @ F2 (K = j2) accumulated at once, then the chunk's outputs stored.
        j2 = tl.arange(0, Q2)
        k2 = tl.arange(0, C)
        for kc in tl.range(0, H1, num_stages=1):
            k1 = kc * Q1 + tl.arange(0, Q1)
            dr = tl.zeros([ROWS * Q1, C], tl.float32)
            di = dr
            for b in tl.range(0, H2, num_stages=1):
                br, bi, pr, pi = _step1(
                    X, PRE, WIN, F1, TW, xrow, rok, b * Q2, kc * Q1, n_in, n_log, sxe, fstart,
                    n_sig, N1, N2, N1P, N2P, Q1, Q2, H1, ROWS, LOAD, REAL_X, HAS_PRE, HAS_WIN,
                    NYQ, INVERSE, TF32X3, PADMODE)  # fmt: skip
                if NYQ:  # the input is read once per k1 chunk: sum it in the first
                    nr += tl.where(kc == 0, pr, 0.0)
                    ni += tl.where(kc == 0, pi, 0.0)
                fo = (b * Q2 + j2)[:, None] * N2P + k2[None, :]
                dr, di = _cmm(tl.reshape(br, (ROWS * Q1, Q2)), tl.reshape(bi, (ROWS * Q1, Q2)),
                              F2, fo, N2P * N2P, dr, di, False, real_only, INVERSE,
                              TF32X3)  # fmt: skip
            k = (k1[:, None] + N1 * k2[None, :])[None, :, :]
            mask = (rok[:, None, None] & ((k1 < N1)[:, None] & (k2 < N2)[None, :])[None, :, :]
                    & (k < n_out))  # fmt: skip
            _store(Y, POST, yrow[:, None, None] + k.to(tl.int64) * sye, k, mask,
                   tl.reshape(dr, (ROWS, Q1, C)), tl.reshape(di, (ROWS, Q1, C)), s1,
                   HAS_POST, REAL_OUT, P1)  # fmt: skip
    if NYQ:  # X[n / 2] = sum_j (-1)^j x[j], the one term of the last needed column
        ko = tl.full([ROWS], (N1 * N2) // 2, tl.int32)
        _store(Y, POST, yrow + ko.to(tl.int64) * sye, ko, rok & (ko < n_out), nr, ni, scale,
               False, REAL_OUT, POWER)  # fmt: skip
    if UNTANGLE:
        untangle_rows(Y, UT, yrow, rok, sye, n_out, scale, N1 * N2, UB, ROWS, POWER)


def fused_cfg(n1p: int, n2p: int, rows: int) -> tuple[int, int]:
    """(ROWS, num_warps) of a [N1P, N2P] tile (n2p = 1: one product) over ``rows`` rows (see
    the module docstring): about POINTS[DOT] points a program, WIDE_POINTS[DOT] with a factor
    padded to 64 (FUSED_POINTS overrides both), no more rows than there are, ROWS >= 16 when
    n2p = 1 (tl.dot's M); 8 warps for a row of 2048 or more padded points (FUSED_WARPS
    overrides)."""
    pts = n1p * n2p
    dot = "tf32x3" if tf32x3() else "ieee"
    target = (WIDE_POINTS if max(n1p, n2p) >= RMAX else POINTS)[dot]
    if interpreting():
        target = _INTERPRET_POINTS
    elif FUSED_POINTS is not None:
        target = FUSED_POINTS
    per = max(1, target // pts, 16 if n2p == 1 else 1)
    per = min(per, max(next_pow2(rows), 16 if n2p == 1 else 1))
    return per, FUSED_WARPS or (8 if pts >= 2048 else 4)


def _chunk(p: int, width: int | None = None) -> int:
    """The chunk of a dimension ``width`` wide (default p) of a factor padded to p: CHUNK
    when p is past CHUNK_OVER, else the whole width."""
    w = p if width is None else width
    c = CHUNK if CHUNK is not None else CHUNKS["tf32x3" if tf32x3() else "ieee"]
    return min(w, c) if p > CHUNK_OVER else w


def fusable(n: int, rfft: bool = False) -> bool:
    """Whether one launch serves length n: n = N1 N2 with both factors <= RMAX, or, for an
    rfft (real input, the n // 2 + 1 terms, no chirp), n even with n / 2 so (through real
    pairs: 8192 = 2 x 64 x 64)."""
    if not FUSED:
        return False
    if n <= RMAX * RMAX and fused_split(n, False, n, False, False) is not None:
        return True
    return rfft and PAIRS and n % 2 == 0 and real_pairs(n) and fusable(n // 2)


def fused_transform(
    src: Operand,
    dst: Operand,
    rows: int,
    d: tuple[int, int],
    *,
    n: int,
    inverse: bool,
    load: int,
    n_in: int,
    n_log: int,
    n_out: int,
    real_out: bool,
    scale: float,
    pre: GPUArray | None = None,
    post: GPUArray | None = None,
    win: GPUArray | None = None,
    power: int = 0,
    frames: tuple[int, int, int, int] = (0, 0, 0, 0),
) -> None:
    """Transform ``rows`` rows of src into dst in one launch (fusable(n), or fusable(n, True)
    for an rfft, must hold). ``load``,
    ``n_in``, ``n_log``, ``pre``, ``post``: as the first and last pass of fft.py read them;
    ``win``: a real window of n_log values (any float dtype, contiguous) multiplied into the
    input as it is loaded (the STFT's windowed frames without writing them); ``power`` 1 or 2:
    store |X| ** power, one fp32 value a term (dst a float array; through real pairs, dst is
    the complex result used as scratch, and the values land in each row's first n_out floats:
    uses_pairs says which); ``frames`` (hop, pad, n_sig, PADMODE): src's rows are frames of
    padded signals (_fft_fused; PADMODE 0: plain rows)."""
    real_x = load == _REAL and pre is None
    nyq_ok = pre is None and post is None
    pairs = uses_pairs(n, load, n_out, real_out, pre, post)
    ut = None
    if pairs:  # the complex n / 2-point transform of x's pairs, then untangle_rows
        ut = untangle(n, src.a._device)
        n, load, real_x, nyq_ok = n // 2, _PAIRS, False, False
        split = fused_split(n, False, n, False, False)
    else:
        split = fused_split(n, real_x, n_out, real_out and post is None, nyq_ok)
    assert split is not None
    n1, n2 = split
    tabs = fused(n, n1, src.a._device)
    n1p, n2p = padded(n1), (1 if n2 == 1 else padded(n2))
    c, nyq = out_cols(n, n1, n2, n if pairs else n_out, nyq_ok)
    per, warps = fused_cfg(n1p, n2p, rows)
    launch(
        _fft_fused, (cdiv(rows, per),),
        src.a, dst.a, tabs.f1, tabs.f2, tabs.tw,
        pre if pre is not None else tabs.f1, post if post is not None else tabs.f1,
        win if win is not None else tabs.f1, ut if ut is not None else tabs.f1, rows, d[0],
        d[1], *src.s, src.se, *dst.s, dst.se,
        n_in, n_log, n_out, scale, frames[0], frames[1], frames[2],
        N1=n1, N2=n2, N1P=n1p, N2P=n2p, Q1=_chunk(n1p), Q2=_chunk(n2p), C=c,
        QC=_chunk(n1p, c) if n2 == 1 else c, ROWS=per, LOAD=load, REAL_X=real_x, PADMODE=frames[3],
        REAL_OUT=real_out, NYQ=nyq, HAS_PRE=pre is not None, HAS_POST=post is not None,
        HAS_WIN=win is not None, INVERSE=inverse, TF32X3=tf32x3(), UNTANGLE=pairs,
        UB=next_pow2(n // 2 + 1) if power else min(UNTANGLE_BLOCK, next_pow2(n // 2 + 1)),
        POWER=power, num_warps=warps,
    )  # fmt: skip


def uses_pairs(
    n: int,
    load: int,
    n_out: int,
    real_out: bool,
    pre: GPUArray | None = None,
    post: GPUArray | None = None,
) -> bool:
    """Whether fused_transform runs this rfft through real pairs (fft_plan.real_pairs)."""
    rfft = load == _REAL and pre is None and post is None and not real_out
    return PAIRS and rfft and n_out == n // 2 + 1 and real_pairs(n)
