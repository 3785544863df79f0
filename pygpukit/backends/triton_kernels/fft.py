"""fft, ifft, rfft, irfft along the last axis in fp32 or float64 (numpy.fft semantics; plans in
fft_plan.py).

Algorithm: a Stockham (self-sorting) mixed-radix transform. n = r_1 r_2 ... r_k; pass s reads
the signal as [r_s, M_s, L_s] (M_s: product of the later radices, L_s: of the earlier ones),
applies the dense r_s-point DFT along the first axis, multiplies by the twiddles
w_(r_s M_s)^(k m) and writes [M_s, r_s, L_s], so after the last pass the result is in natural
order and no digit reversal is needed (Van Loan, "Computational Frameworks for the FFT", 1.7).
The four-step split N = N1 N2 is the two-pass case.

Why dense DFT matrices through tl.dot instead of radix-2/4 butterflies: a pass's DFT over a
[RP, BLOCK_C] tile of columns is one [RP, RP] x [RP, BLOCK_C] complex product (four real
tl.dot in fp32-accurate precision, see fft_fused.DOT), which Triton maps to wide FMA tiles with no
shuffles, handles any radix up to 64 (3, 5, 7, 25, 61 ... as well as powers of two) with one
kernel, and sums each output over r <= 64 products, so its rounding error stays near that of a
radix-2 transform (measured under the interpreter: <= 2.6e-7 relative per row for every tested
length up to 2**20, Bluestein included). The cost is RP multiply-adds a point a pass (a radix-2
FFT needs ~log2 r); by the H100's ratio of fp32 rate to bandwidth that stays near the memory
time of a pass for RP <= 32 (an estimate, not yet a measurement), and fft_plan.radices balances
the two. Every pass reads and writes the whole signal (global scratch between passes, from the
pool); one pass for n <= 64, two for the lengths of speech features (400 = 25 x 16, 512 = 32 x
16), three for 1000, 2048 and 4096, four or five for the long 1-D lengths (2**18, 2**20).

Lengths n = N1 N2 with both factors <= 64 (every n <= 64, and the smooth lengths up to 4096:
the speech frames 400, 512, 2048) skip the passes: fft_fused.py does the whole transform of a
few rows in one program, reading the input once and writing the result once (its docstring
has the index mapping and the tiles). The passes through global scratch remain for the rest:
one kernel then serves every length (a row of 16384 Bluestein points or 2**20 points does not
fit a program), at the price of one extra read and write of the signal per pass beyond the
first. PYGPUKIT_FFT_FUSED=0 turns the fused path off (for comparison); PYGPUKIT_FFT_DOT
("tf32x3", the default, or "ieee") sets the tl.dot precision of both kernels.

Lengths with a prime factor above 64 use Bluestein's chirp-z transform: X[k] = c[k] (a * b)[k]
with a[j] = x[j] c[j], c[j] = exp(-i pi j^2 / n), the circular convolution computed as
IFFT_M(FFT_M(a) . Bhat) on M = next_pow2(2n - 1) points, Bhat precomputed in float64. Both
transforms are two fused launches through one scratch buffer when M <= 4096, else the same
Stockham passes: the chirp is applied as the first pass loads, Bhat
likewise in the inverse's first pass, the closing chirp and the norm scale as the last pass
stores (no extra launches).

Real input (fft, rfft) is read as real with zero imaginary parts (the first pass skips the two
products of the imaginary part); rfft stores the first n // 2 + 1 terms of the last pass.
irfft reads its n // 2 + 1 terms as the full Hermitian spectrum (X[n - k] = conj(X[k])) and
stores the real part of the inverse, which is exactly numpy's rule that the imaginary parts of
the DC and Nyquist terms are ignored (they only add to the imaginary part of the output).

float64 (float64 / complex128 in, complex128 / float64 out): the same Stockham passes and
Bluestein in float64 throughout (values, tables, tl.dot on float64 tiles, which is IEEE float64:
DMMA on sm_80+), at every length; never the one-kernel path, whose tiles are sized for fp32
registers. The routing table sends float64 at the native kernel's powers of two there first.
Graph capture: scratch and outputs come from the pool (the capture's pool under capture);
a length's plan tables are uploaded on its first call, so run each length once before capturing.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit._complex import view_as_real
from pygpukit.array import GPUArray
from pygpukit.backends._support.fft import (
    frame_mode,
    norm_scale,
    operand,
    plan_transform_rows,
)
from pygpukit.backends._support.output import deliver
from pygpukit.backends.triton_kernels import interpreting
from pygpukit.backends.triton_kernels._common import (
    cdiv,
    next_pow2,
    pad_index,
    row_offset,
)
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.elementwise import mul
from pygpukit.backends.triton_kernels.fft_fused import (
    Operand,
    fusable,
    fused_transform,
    mm,
    tf32x3,
    uses_pairs,
)
from pygpukit.backends.triton_kernels.fft_plan import Chirp, Plan, chirp, plan, radices
from pygpukit.backends.triton_kernels.reduce import sum as rsum
from pygpukit.backends.triton_kernels.unary import sqrt
from pygpukit.creation import empty
from pygpukit.dtypes import complex64, complex128, float32, float64

__all__ = ["fft", "ifft", "irfft", "rfft", "rfft_frames", "rfft_windowed"]

# How the first pass reads its input: complex pairs, real values, or the Hermitian half of
# irfft (element e >= n // 2 + 1 is conj(x[n - e])).
_COMPLEX, _REAL, _HERMITIAN = 0, 1, 2


@triton.jit
def _fft_pass(
    X, Y, F, T, PRE, POST,
    n_cols, ML, L, M, RL,
    D1, D2, sx0, sx1, sx2, sxe, sy0, sy1, sy2, sye,
    n_in, n_log, n_out, scale: tl.float64, R,
    RP: tl.constexpr, BLOCK_C: tl.constexpr,
    LOAD: tl.constexpr, REAL_X: tl.constexpr, REAL_OUT: tl.constexpr, HAS_TW: tl.constexpr,
    HAS_PRE: tl.constexpr, HAS_POST: tl.constexpr, INVERSE: tl.constexpr, TF32X3: tl.constexpr,
    CT: tl.constexpr,
):  # fmt: skip
    """One Stockham pass of radix R (padded to RP) over BLOCK_C columns. Column c = (row, m, b)
    reads logical elements e = k ML + m L + b (k < R) and writes o = m RL + k L + b; offsets
    are in real units, a complex value being the pair (o * s, o * s + 1). R is a runtime value
    (only RP specialises), so all radices of one padded size share a compiled kernel. CT: the
    compute type, tl.float32 or tl.float64 (then the tables are float64 too, and tl.dot on
    float64 tiles is IEEE float64); the scale arrives in float64 and is rounded to CT once."""
    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < n_cols
    row = c // ML
    rem = c - row * ML
    k = tl.arange(0, RP)
    ok = (k < R)[:, None] & cmask[None, :]
    e = k[:, None].to(tl.int64) * ML + rem[None, :]
    if LOAD == 2:
        half = n_log // 2 + 1
        mirrored = e >= half
        src = tl.where(mirrored, n_log - e, e)
        ok_in = ok & (e < n_log) & (src < n_in)
    else:
        src = e
        ok_in = ok & (e < n_in)
    xo = row_offset(row, D1, D2, sx0, sx1, sx2)[None, :] + src * sxe
    xr = tl.load(X + xo, mask=ok_in, other=0.0).to(CT)
    if LOAD == 1:
        xi = tl.zeros_like(xr)
    else:
        xi = tl.load(X + xo + 1, mask=ok_in, other=0.0).to(CT)
        if LOAD == 2:
            xi = tl.where(mirrored, -xi, xi)
    if HAS_PRE:  # a chirp or Bluestein's Bhat, indexed by the logical element
        pr = tl.load(PRE + 2 * e, mask=ok_in, other=0.0)
        pi = tl.load(PRE + 2 * e + 1, mask=ok_in, other=0.0)
        xr, xi = xr * pr - xi * pi, xr * pi + xi * pr
    fo = k[:, None] * RP + k[None, :]
    fr = tl.load(F + fo)
    fi = tl.load(F + RP * RP + fo)
    if INVERSE:
        fi = -fi
    if REAL_X:
        yr = mm(fr, xr, TF32X3)
        yi = mm(fi, xr, TF32X3)
    else:
        yr = mm(fr, xr, TF32X3) - mm(fi, xi, TF32X3)
        yi = mm(fr, xi, TF32X3) + mm(fi, xr, TF32X3)
    m = rem // L
    if HAS_TW:
        to = 2 * (k[:, None] * M + m[None, :])
        tr = tl.load(T + to, mask=ok, other=1.0)
        ti = tl.load(T + to + 1, mask=ok, other=0.0)
        if INVERSE:
            ti = -ti
        yr, yi = yr * tr - yi * ti, yr * ti + yi * tr
    o = (m * RL + (rem - m * L))[None, :] + k[:, None].to(tl.int64) * L
    ok_out = ok & (o < n_out)
    if HAS_POST:
        qr = tl.load(POST + 2 * o, mask=ok_out, other=0.0)
        qi = tl.load(POST + 2 * o + 1, mask=ok_out, other=0.0)
        yr, yi = yr * qr - yi * qi, yr * qi + yi * qr
    yo = row_offset(row, D1, D2, sy0, sy1, sy2)[None, :] + o * sye
    s = scale.to(CT)
    tl.store(Y + yo, yr * s, mask=ok_out)
    if not REAL_OUT:
        tl.store(Y + yo + 1, yi * s, mask=ok_out)


def _scratch(rows: int, n: int, d: tuple[int, int], like: GPUArray, f64: bool) -> Operand:
    buf = empty((rows * n * 2,), float64 if f64 else float32, like._device)
    rl = 2 * n
    return Operand(buf, (d[0] * d[1] * rl, d[1] * rl, rl), 2)


# Points (RP x BLOCK_C) a pass program transforms on the GPU, by float64: the tile, its result
# and the [RP, RP] matrix live in registers, and a float64 value takes two. BLOCK_C is at least
# 16 (tl.dot), so a radix-64 pass takes 1024 points whatever the table says. float64 on an H200
# (96000 rows, 2026-11-27): 512 / 1024 / 2048 / 4096 points took 2103 / 2109 / 2127 / 9045 us
# for fft 400 and 6299 / 6631 / 7362 / 16714 us for fft 1000 (the last spilling).
PASS_POINTS = {False: 2048, True: 512}


def _cfg(rp: int, n_cols: int, f64: bool) -> tuple[int, int]:
    """(BLOCK_C, num_warps) of a pass (PASS_POINTS); under the interpreter, few large programs
    (its cost is per program)."""
    cap = 4096 if interpreting() else max(16, PASS_POINTS[f64] // rp)
    return max(16, min(cap, next_pow2(n_cols))), (8 if rp >= 64 else 4)


def _passes(
    p: Plan,
    src: Operand,
    dst: Operand | None,
    rows: int,
    d: tuple[int, int],
    *,
    inverse: bool,
    load: int,
    n_in: int,
    n_log: int,
    n_out: int,
    real_out: bool = False,
    pre: GPUArray | None = None,
    post: GPUArray | None = None,
    scale: float = 1.0,
    spare: list[Operand] | None = None,
) -> Operand:
    """Run the plan's passes from src into dst (None: a scratch buffer); returns where the
    result is. The first pass reads src with ``load``/``pre``, the last writes with ``post``,
    ``n_out``, ``real_out`` and ``scale``; scratch alternates between two buffers. A float64
    plan runs float64 arithmetic and scratch."""
    f64 = p.f64
    pool = spare if spare is not None else []
    cur = src
    last = len(p.passes) - 1
    for i, ps in enumerate(p.passes):
        if i == last and dst is not None:
            out = dst
        else:
            out = next((b for b in pool if b.a is not cur.a), None)  # type: ignore[assignment]
            if out is None:
                out = _scratch(rows, p.n, d, src.a, f64)
                pool.append(out)
        first = i == 0
        n_cols = rows * (p.n // ps.r)
        block, warps = _cfg(ps.rp, n_cols, f64)
        ld = load if first else _COMPLEX
        has_pre = first and pre is not None
        launch(
            _fft_pass, (cdiv(n_cols, block),),
            cur.a, out.a, ps.f, ps.t if ps.t is not None else ps.f,
            pre if has_pre else ps.f, post if (i == last and post is not None) else ps.f,
            n_cols, ps.M * ps.L, ps.L, ps.M, ps.r * ps.L,
            d[0], d[1], *cur.s, cur.se, *out.s, out.se,
            n_in if first else p.n, n_log if first else p.n, n_out if i == last else p.n,
            scale if i == last else 1.0, ps.r,
            RP=ps.rp, BLOCK_C=block, LOAD=ld, REAL_X=ld == _REAL and not has_pre,
            REAL_OUT=real_out and i == last, HAS_TW=ps.t is not None, HAS_PRE=has_pre,
            HAS_POST=i == last and post is not None, INVERSE=inverse,
            TF32X3=not f64 and tf32x3(), CT=tl.float64 if f64 else tl.float32, num_warps=warps,
        )  # fmt: skip
        cur = out
    return cur


def _bluestein(
    n: int,
    src: Operand,
    dst: Operand,
    rows: int,
    d: tuple[int, int],
    *,
    inverse: bool,
    load: int,
    n_in: int,
    n_out: int,
    real_out: bool,
    scale: float,
    f64: bool,
) -> None:
    """X[k] = c[k] IFFT_M(FFT_M(x c) . Bhat)[k] for k < n_out (see the module docstring)."""
    cz: Chirp = chirp(n, inverse, src.a._device, f64)
    if not f64 and fusable(cz.m):  # two launches through one scratch buffer
        mid = _scratch(rows, cz.m, d, src.a, f64)
        fused_transform(
            src, mid, rows, d, n=cz.m, inverse=False, load=load, n_in=n_in, n_log=n,
            n_out=cz.m, real_out=False, scale=1.0, pre=cz.c,
        )  # fmt: skip
        fused_transform(
            mid, dst, rows, d, n=cz.m, inverse=True, load=_COMPLEX, n_in=cz.m, n_log=cz.m,
            n_out=n_out, real_out=real_out, scale=scale, pre=cz.bhat, post=cz.c,
        )  # fmt: skip
        return
    inner = plan(cz.m, src.a._device, f64)
    spare: list[Operand] = []
    mid = _passes(
        inner, src, None, rows, d, inverse=False, load=load, n_in=n_in, n_log=n,
        n_out=cz.m, pre=cz.c, spare=spare,
    )  # fmt: skip
    _passes(
        inner, mid, dst, rows, d, inverse=True, load=_COMPLEX, n_in=cz.m, n_log=cz.m,
        n_out=n_out, real_out=real_out, pre=cz.bhat, post=cz.c, scale=scale, spare=spare,
    )  # fmt: skip


def _double(a: GPUArray) -> bool:
    """A float64 transform: the passes and Bluestein in float64, never the fp32 one-kernel path
    (its tiles are sized for fp32 registers)."""
    return a.dtype in (float64, complex128)


def _transform(
    x: GPUArray,
    out: GPUArray | None,
    *,
    n: int,
    norm: str,
    inverse: bool,
    load: int,
    n_out: int,
    real_out: bool,
    win: GPUArray | None = None,
    power: int = 0,
) -> GPUArray:
    f64 = _double(x)
    rfft_like = load == _REAL and not real_out and n_out == n // 2 + 1
    one_kernel = not f64 and fusable(n, rfft_like)
    if not one_kernel:
        if win is not None:
            # The window multiplied in as the fused kernel's loads do (one fp32 product a
            # value, kept in fp32 for half inputs; float64 stays float64), but written out: the
            # passes and Bluestein read their input in several places.
            x = mul(x, win, out_dtype=float64 if f64 else float32)
        if power:  # the complex result, then |X| ** power as audio._complex computes it
            z = _transform(x, None, n=n, norm=norm, inverse=inverse, load=load, n_out=n_out,
                           real_out=real_out)  # fmt: skip
            ri = view_as_real(z)
            p = rsum(mul(ri, ri), axis=-1)
            return deliver(sqrt(p) if power == 1 else p, out)
        win = None
    lead = x.shape[:-1]
    shape = (*lead, n_out)
    rows = 1
    for v in lead:
        rows *= v
    # Through real pairs a power result is written into the complex result's rows (its
    # scratch) and handed back as a view of each row's first n_out floats.
    scratch = bool(power) and rows > 0 and uses_pairs(n, load, n_out, real_out)
    if out is not None and not scratch:
        y = out
    else:
        real_y = real_out or (bool(power) and not scratch)
        if f64:
            y = empty(shape, float64 if real_y else complex128, x._device)
        else:
            y = empty(shape, float32 if real_y else complex64, x._device)
    if rows == 0:
        return deliver(y, out)
    r = plan_transform_rows(x, y, out)
    x, y, d = r.x, r.y, r.d
    src = Operand(r.xf, r.xs, r.xe)
    dst = Operand(r.yf, r.ys, r.ye)
    n_in = min(x.shape[-1], n // 2 + 1 if load == _HERMITIAN else n)
    scale = norm_scale(n, norm, inverse)
    if one_kernel:
        fused_transform(
            src, dst, rows, d, n=n, inverse=inverse, load=load, n_in=n_in, n_log=n,
            n_out=n_out, real_out=real_out, scale=scale, win=win, power=power,
        )  # fmt: skip
        if scratch:
            flat = view_as_real(y).reshape(*lead, 2 * n_out)
            return deliver(flat[..., :n_out], out)
    elif radices(n) is None:
        _bluestein(
            n, src, dst, rows, d, inverse=inverse, load=load, n_in=n_in, n_out=n_out,
            real_out=real_out, scale=scale, f64=f64,
        )  # fmt: skip
    else:
        _passes(
            plan(n, x._device, f64), src, dst, rows, d, inverse=inverse, load=load, n_in=n_in,
            n_log=n, n_out=n_out, real_out=real_out, scale=scale,
        )  # fmt: skip
    return deliver(y, out)


def _load_of(x: GPUArray) -> int:
    return _COMPLEX if x.dtype.is_complex else _REAL


def fft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Forward n-point DFT of x's rows (real or complex) -> complex64 (complex128 from float64 /
    complex128 x)."""
    return _transform(
        x, out, n=n, norm=norm, inverse=False, load=_load_of(x), n_out=n, real_out=False
    )


def ifft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Inverse n-point DFT of x's rows (real or complex) -> complex64 (complex128 from float64 /
    complex128 x)."""
    return _transform(
        x, out, n=n, norm=norm, inverse=True, load=_load_of(x), n_out=n, real_out=False
    )


def rfft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """The n // 2 + 1 non-negative frequency terms of real rows -> complex64 (complex128 from
    float64 x)."""
    return _transform(
        x, out, n=n, norm=norm, inverse=False, load=_REAL, n_out=n // 2 + 1, real_out=False
    )


def irfft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Real rows of length n from their n // 2 + 1 Hermitian terms (complex64 -> float32,
    complex128 -> float64)."""
    return _transform(x, out, n=n, norm=norm, inverse=True, load=_HERMITIAN, n_out=n, real_out=True)


def rfft_windowed(
    x: GPUArray,
    window: GPUArray,
    *,
    n: int,
    norm: str = "backward",
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """rfft(x * window) of real rows of n values and a real window of n values -> complex64,
    or |rfft(x * window)| ** power (power 1.0 or 2.0) -> float32 (complex128 / float64 from
    float64 x). Where the one-kernel path serves n the window is applied as the kernel loads x,
    so an STFT's overlapping frames are read in place and never written windowed, and the power
    is taken as the kernel stores (no complex result written and read back). Through real
    pairs (fft_plan.real_pairs) a power result is a strided view of each row's first n // 2 + 1
    floats in the complex rows the kernel used as scratch (twice the memory of a compact result
    while it lives)."""
    return _transform(
        x, out, n=n, norm=norm, inverse=False, load=_REAL, n_out=n // 2 + 1, real_out=False,
        win=window.contiguous(), power=0 if power is None else int(power),
    )  # fmt: skip


@triton.jit
def _pad_rows(X, Y, n, pad, width, blocks, sx0, sxe, BLOCK: tl.constexpr, MODE: tl.constexpr):
    """Y[b, j] = np.pad(X[b], pad, MODE)[j] for j < width (Y contiguous rows of width), one
    block of a row a program (a 1-D grid: no 65535 limit on either count)."""
    pid = tl.program_id(0).to(tl.int64)
    b = pid // blocks
    j = (pid % blocks) * BLOCK + tl.arange(0, BLOCK)
    src, valid = pad_index(j.to(tl.int64) - pad, n, MODE)
    v = tl.load(X + b * sx0 + src * sxe, mask=(j < width) & valid, other=0.0)
    tl.store(Y + b * width + j, v, mask=j < width)


def rfft_frames(
    y: GPUArray,
    window: GPUArray,
    *,
    n: int,
    hop: int,
    pad: int,
    pad_mode: str,
    n_frames: int,
    norm: str = "backward",
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """rfft(frames * window) [batch, n_frames, n_fft // 2 + 1] (n_fft = n = len(window)) of the
    frames hop apart of y [batch, samples] padded by pad on both sides as np.pad's pad_mode,
    or its magnitude / power (power 1 or 2). Where the one-kernel path serves n_fft the kernel
    reads each frame's samples from y itself, the padding and the window applied as it loads:
    one launch, no padded or windowed copy. Otherwise a padded copy (one launch) and
    rfft_windowed over its frames. A power result through real pairs is a view of each row's
    first floats in the complex rows the kernel used as scratch (rfft_windowed)."""
    mode = frame_mode(n, window, pad, pad_mode)
    n_fft = n
    b, samples = y.shape
    if _double(y) or not fusable(n_fft, True):
        src = y
        if pad:
            width = samples + 2 * pad
            src = empty((b, width), y.dtype, y._device)
            blocks = cdiv(width, 1024)
            if b:
                launch(_pad_rows, (b * blocks,), y, src, samples, pad, width, blocks,
                       *y.element_strides, BLOCK=1024, MODE=mode)  # fmt: skip
        row, col = src.element_strides
        frames = src._view((b, n_frames, n_fft), (row, hop * col, col), src._offset)
        return rfft_windowed(frames, window, n=n_fft, norm=norm, power=power, out=out)
    nb = n_fft // 2 + 1
    p = 0 if power is None else int(power)
    scratch = bool(p) and uses_pairs(n_fft, _REAL, nb, False)
    if out is not None and not scratch:
        res = out
    else:
        res = empty((b, n_frames, nb), float32 if p and not scratch else complex64, y._device)
    if b * n_frames:
        rf, rs, re = operand(res)
        fused_transform(
            Operand(y, (0, y.element_strides[0], 0), y.element_strides[1]),
            Operand(rf, (0, rs[0], rs[1]), re), b * n_frames, (b, n_frames), n=n_fft,
            inverse=False, load=_REAL, n_in=n_fft, n_log=n_fft, n_out=nb,
            real_out=False, scale=norm_scale(n_fft, norm, False), win=window.contiguous(), power=p,
            frames=(hop, pad, samples, mode),
        )  # fmt: skip
    if scratch:
        res = view_as_real(res).reshape(b, n_frames, 2 * nb)[..., :nb]
    return deliver(res, out)
