"""The one-kernel FFT of fft.py for lengths n = N1 N2 with both factors <= 64 (every length up
to 64, and the smooth lengths up to 4096: 400 = 16 x 25, 512, 1000, 2048, 4096 = 64 x 64).

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
64). Not done: rfft as a complex n / 2-point transform plus an untangling step (X[k] from
Z[k] and conj(Z[n / 2 - k])); the reversed index k1 -> N1 - k1 mod N1, k2 -> N2 - 1 - k2
across a padded tile is a gather that Triton cannot do in registers, and the two fixes above
already bring rfft to about half the products of fft.

Rows per program: a program's tile is ROWS N1P N2P points, ROWS = POINTS[DOT] / (N1P N2P),
at least 1, at least 16 when N2 = 1 (tl.dot's M >= 16), and no more than the rows there are;
4 warps, 8 for a row of 2048 or more padded points (2048, 4096, 1000 = 20 x 50 -> 32 x 64).
POINTS is 1024 for "ieee" and 2048 for "tf32x3", first from ptxas's register counts of the
sm_90 build, then confirmed by benchmarks/fft.py --points on an H100 (96000 rows, 2026-11-26:
tf32x3 rfft n=400 at 512/1024/2048/4096 points took 794/442/278/325 us, fft n=512
738/889/551/657 us; ieee fft n=400 981/753/925/24958 us, the last spilling). Why: Triton's
FMA tl.dot keeps a thread's rows of A and columns of B for
the whole K in registers, so at 2048 points and 4 warps the fp32 products of 400 and 512
(16 x 32 tiles) spill 0.5 KB a thread, at 1024 points they take ~185 registers and none;
tf32x3 goes through wgmma (operands in shared memory) and needs no spill at 2048 points (~140
registers). Rows with a factor padded to 64 (2048, 4096, n in 33..64) still spill with
"ieee" (0.3 to 30 KB) and a little with "tf32x3": splitting those K = 64 products in two is
the next step if the GPU numbers call for it. benchmarks/fft.py --points sweeps the table.
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
from pygpukit.backends.triton_kernels.fft_plan import RMAX, fused, fused_split, out_cols, padded

__all__ = [
    "DOT",
    "DOTS",
    "FUSED",
    "FUSED_POINTS",
    "POINTS",
    "Operand",
    "fusable",
    "fused_cfg",
    "fused_transform",
    "mm",
    "tf32x3",
]

DOTS = ("ieee", "tf32x3")
DOT = os.environ.get("PYGPUKIT_FFT_DOT", "tf32x3")
# The fused path on (1) or off (0: every length through fft.py's passes, for comparison).
FUSED = os.environ.get("PYGPUKIT_FFT_FUSED", "1") != "0"
# Points a program by DOT variant (module docstring); FUSED_POINTS, when set, overrides.
POINTS = {"ieee": 1024, "tf32x3": 2048}
FUSED_POINTS: int | None = None
_INTERPRET_POINTS = 16384

# How the input is read (fft.py's names): complex pairs, real values, the Hermitian half.
_COMPLEX, _REAL, _HERMITIAN = 0, 1, 2


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
def _store(Y, POST, yo, k, mask, yr, yi, scale, HAS_POST: tl.constexpr, REAL_OUT: tl.constexpr):
    """Store output values k at offsets yo (times POST[k], a chirp, and the norm scale); only
    the real part when REAL_OUT."""
    if HAS_POST:
        qr = tl.load(POST + 2 * k, mask=mask, other=0.0)
        qi = tl.load(POST + 2 * k + 1, mask=mask, other=0.0)
        yr, yi = yr * qr - yi * qi, yr * qi + yi * qr
    tl.store(Y + yo, yr * scale, mask=mask)
    if not REAL_OUT:
        tl.store(Y + yo + 1, yi * scale, mask=mask)


@triton.jit
def _fft_fused(
    X, Y, F1, F2, TW, PRE, POST,
    n_rows, D1, D2, sx0, sx1, sx2, sxe, sy0, sy1, sy2, sye,
    n_in, n_log, n_out, scale,
    N1: tl.constexpr, N2: tl.constexpr, N1P: tl.constexpr, N2P: tl.constexpr,
    C: tl.constexpr, ROWS: tl.constexpr, LOAD: tl.constexpr, REAL_X: tl.constexpr,
    REAL_OUT: tl.constexpr, NYQ: tl.constexpr, HAS_PRE: tl.constexpr, HAS_POST: tl.constexpr,
    INVERSE: tl.constexpr, TF32X3: tl.constexpr,
):  # fmt: skip
    """The whole n = N1 N2 point transform of ROWS rows (see the module docstring). Offsets
    are in units of the operands' element type, a complex value being the pair (o, o + 1)."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rok = r < n_rows
    j2 = tl.arange(0, N2P)
    j1 = tl.arange(0, N1P)
    # Tile A[r, j2, j1] = x[r, N2 j1 + j2]: logical input element e.
    e = (j2[:, None] + N2 * j1[None, :])[None, :, :]
    tile = ((j2 < N2)[:, None] & (j1 < N1)[None, :])[None, :, :]
    ok = rok[:, None, None] & tile
    if LOAD == 2:
        mirrored = e >= n_log // 2 + 1
        src = tl.where(mirrored, n_log - e, e)
        ok_in = ok & (e < n_log) & (src < n_in)
    else:
        src = e
        ok_in = ok & (e < n_in)
    xo = row_offset(r, D1, D2, sx0, sx1, sx2)[:, None, None] + src.to(tl.int64) * sxe
    xr = tl.load(X + xo, mask=ok_in, other=0.0).to(tl.float32)
    if LOAD == 1:
        xi = tl.zeros_like(xr)
    else:
        xi = tl.load(X + xo + 1, mask=ok_in, other=0.0).to(tl.float32)
        if LOAD == 2:
            xi = tl.where(mirrored, -xi, xi)
    if HAS_PRE:  # Bluestein's chirp or Bhat, indexed by the logical element
        pok = tile & (e < n_log)
        pr = tl.load(PRE + 2 * e, mask=pok, other=0.0)
        pi = tl.load(PRE + 2 * e + 1, mask=pok, other=0.0)
        xr, xi = xr * pr - xi * pi, xr * pi + xi * pr
    yrow = row_offset(r, D1, D2, sy0, sy1, sy2)
    if NYQ:  # X[n / 2] = sum_j (-1)^j x[j], the one term of the last needed column
        sign = tl.where(e % 2 == 0, 1.0, -1.0)
        nr = tl.sum(tl.sum(xr * sign, axis=2), axis=1)
        ni = tl.sum(tl.sum(xi * sign, axis=2), axis=1)
        ko = tl.full([ROWS], (N1 * N2) // 2, tl.int32)
        _store(Y, POST, yrow + ko.to(tl.int64) * sye, ko, rok & (ko < n_out), nr, ni, scale,
               False, REAL_OUT)  # fmt: skip
    # Step 1: B[(r, j2), k1] = sum_j1 A[(r, j2), j1] F1[j1, k1]; with N2 = 1 the only product,
    # over the output columns k1 < C.
    C1: tl.constexpr = C if N2 == 1 else N1P
    k1 = tl.arange(0, C1)
    fo = j1[:, None] * N1P + k1[None, :]
    f1r = tl.load(F1 + fo)
    f1i = tl.load(F1 + N1P * N1P + fo)
    if INVERSE:
        f1i = -f1i
    ar = tl.reshape(xr, (ROWS * N2P, N1P))
    if REAL_X:
        br = mm(ar, f1r, TF32X3)
        bi = mm(ar, f1i, TF32X3)
    else:
        ai = tl.reshape(xi, (ROWS * N2P, N1P))
        br = mm(ar, f1r, TF32X3) - mm(ai, f1i, TF32X3)
        if REAL_OUT and N2 == 1 and not HAS_POST:
            bi = br  # unused
        else:
            bi = mm(ar, f1i, TF32X3) + mm(ai, f1r, TF32X3)
    if N2 == 1:
        k = k1[None, :]
        mask = rok[:, None] & (k < N1) & (k < n_out)
        _store(Y, POST, yrow[:, None] + k.to(tl.int64) * sye, k, mask, br, bi, scale,
               HAS_POST, REAL_OUT)  # fmt: skip
    else:
        # Step 2: twiddles W[j2, k1] = w_n^(j2 k1), shared by the rows.
        to = j2[:, None] * N1P + j1[None, :]
        tr = tl.load(TW + to)[None, :, :]
        ti = tl.load(TW + N2P * N1P + to)[None, :, :]
        if INVERSE:
            ti = -ti
        br = tl.reshape(br, (ROWS, N2P, N1P))
        bi = tl.reshape(bi, (ROWS, N2P, N1P))
        br, bi = br * tr - bi * ti, br * ti + bi * tr
        # Step 3: D[(r, k1), k2] = sum_j2 B[(r, k1), j2] F2[j2, k2] over the columns k2 < C.
        br = tl.reshape(tl.permute(br, (0, 2, 1)), (ROWS * N1P, N2P))
        bi = tl.reshape(tl.permute(bi, (0, 2, 1)), (ROWS * N1P, N2P))
        k2 = tl.arange(0, C)
        fo2 = j2[:, None] * N2P + k2[None, :]
        f2r = tl.load(F2 + fo2)
        f2i = tl.load(F2 + N2P * N2P + fo2)
        if INVERSE:
            f2i = -f2i
        dr = tl.reshape(mm(br, f2r, TF32X3) - mm(bi, f2i, TF32X3), (ROWS, N1P, C))
        if REAL_OUT and not HAS_POST:
            di = dr  # unused
        else:
            di = tl.reshape(mm(br, f2i, TF32X3) + mm(bi, f2r, TF32X3), (ROWS, N1P, C))
        k = (j1[:, None] + N1 * k2[None, :])[None, :, :]
        mask = (rok[:, None, None] & ((j1 < N1)[:, None] & (k2 < N2)[None, :])[None, :, :]
                & (k < n_out))  # fmt: skip
        _store(Y, POST, yrow[:, None, None] + k.to(tl.int64) * sye, k, mask, dr, di, scale,
               HAS_POST, REAL_OUT)  # fmt: skip


def fused_cfg(n1p: int, n2p: int, rows: int) -> tuple[int, int]:
    """(ROWS, num_warps) of a [N1P, N2P] tile (n2p = 1: one product) over ``rows`` rows (see
    the module docstring): about POINTS[DOT] points a program (FUSED_POINTS overrides), no more
    rows than there are, ROWS >= 16 when n2p = 1 (tl.dot's M); 8 warps for a row of 2048 or
    more padded points."""
    pts = n1p * n2p
    target = POINTS["tf32x3" if tf32x3() else "ieee"]
    if interpreting():
        target = _INTERPRET_POINTS
    elif FUSED_POINTS is not None:
        target = FUSED_POINTS
    per = max(1, target // pts, 16 if n2p == 1 else 1)
    per = min(per, max(next_pow2(rows), 16 if n2p == 1 else 1))
    return per, (8 if pts >= 2048 else 4)


def fusable(n: int) -> bool:
    return FUSED and n <= RMAX * RMAX and fused_split(n, False, n, False, False) is not None


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
) -> None:
    """Transform ``rows`` rows of src into dst in one launch (fusable(n) must hold). ``load``,
    ``n_in``, ``n_log``, ``pre``, ``post``: as the first and last pass of fft.py read them."""
    real_x = load == _REAL and pre is None
    nyq_ok = pre is None and post is None
    split = fused_split(n, real_x, n_out, real_out and post is None, nyq_ok)
    assert split is not None
    n1, n2 = split
    tabs = fused(n, n1, src.a._device)
    n1p, n2p = padded(n1), (1 if n2 == 1 else padded(n2))
    c, nyq = out_cols(n, n1, n2, n_out, nyq_ok)
    per, warps = fused_cfg(n1p, n2p, rows)
    launch(
        _fft_fused, (cdiv(rows, per),),
        src.a, dst.a, tabs.f1, tabs.f2, tabs.tw,
        pre if pre is not None else tabs.f1, post if post is not None else tabs.f1,
        rows, d[0], d[1], *src.s, src.se, *dst.s, dst.se, n_in, n_log, n_out, scale,
        N1=n1, N2=n2, N1P=n1p, N2P=n2p, C=c, ROWS=per, LOAD=load, REAL_X=real_x,
        REAL_OUT=real_out, NYQ=nyq, HAS_PRE=pre is not None, HAS_POST=post is not None,
        INVERSE=inverse, TF32X3=tf32x3(), num_warps=warps,
    )  # fmt: skip
