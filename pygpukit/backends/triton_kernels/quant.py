"""FP8 quantize / dequantize with amax-derived scales (numerics of backends/cpu/quant.py).

An array is viewed as [R, C] (leading dims collapsed, else a contiguous copy first) and cut into
groups of (GR, GC) elements, one fp32 scale per group: per tensor (R, C), per row (1, C), 1x128
activation blocks (1, 128), 128x128 weight blocks (128, 128). Per group: amax = max |x|, scale =
amax / fp8_max (div.rn: the IEEE quotient the reference computes; 1.0 for a group of zeros), q =
x / scale (div.rn) clamped to +-fp8_max and converted with copy.py's ``convert`` (round to
nearest even, ml_dtypes' values bit for bit).

Kernels:
- rows (GR == 1: per row and 1xGC blocks): a program takes TR rows of one column group, finds
  the rows' amax over the group (chunks of TC columns), then re-reads the group (from L1/L2)
  and writes the codes: one launch, each element read twice, written once.
- tiles (GR > 1: 2-D blocks): a program per group, the same two passes over a [TR, TC] tile.
- tensor: the amax needs every element before any code can be written, so two launches with
  no host sync and no atomics: programs reduce a fixed share of [TR, TC] tiles to one partial
  amax each (at most 4 per SM), then every quantize program reduces the same partials to the
  same scale (deterministic) and writes its tile; program 0 stores the scale.
- dequantize: elementwise over [BR, BC] tiles, the scale gathered per element (cached), the
  float32 product rounded once by ``convert``.

Under TRITON_INTERPRET=1 the fp8 codes are not the GPU's: the interpreter emulates fp32 -> fp8
by truncation (tests/triton_kernels/test_copy.py); scales and fp8 -> float32 are exact there.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from pygpukit.backends._support.rows import as_2d
from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    as_dt,
    cdiv,
    nd_tile,
    new_out,
    next_pow2,
    sm_count,
    tl_dtype,
)
from pygpukit.backends.triton_kernels.copy import contiguous, convert, copy
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty

__all__ = ["dequantize_fp8", "quantize_fp8"]

_FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


# div_rn does not broadcast its operands (the interpreter would): both get the same shape.
@triton.jit
def _scale_of(amax, FMAX: tl.constexpr):
    s = tl.div_rn(amax, tl.full(amax.shape, FMAX, tl.float32))
    return tl.where(s == 0.0, 1.0, s)


@triton.jit
def _codes(x, scale, FMAX: tl.constexpr, DST: tl.constexpr):
    xf = x.to(tl.float32)
    y = tl.div_rn(xf, tl.zeros(xf.shape, tl.float32) + scale)
    y = tl.maximum(y, -FMAX, propagate_nan=tl.PropagateNan.ALL)
    y = tl.minimum(y, FMAX, propagate_nan=tl.PropagateNan.ALL)
    return convert(y, DST)


@triton.jit
def _quant_rows_kernel(
    X, Q, S, R, C, sxr, sxc, sqr, ssr, ssc, GC,
    FMAX: tl.constexpr, DST: tl.constexpr, TR: tl.constexpr, TC: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * TR + tl.arange(0, TR)
    gc = tl.program_id(1)
    rm = rows < R
    r64 = rows.to(tl.int64)[:, None]
    c_lo = gc * GC
    c_hi = tl.minimum(C, c_lo + GC)
    cr = tl.arange(0, TC)
    acc = tl.zeros([TR, TC], tl.float32)
    for c0 in range(c_lo, c_hi, TC):
        cols = c0 + cr
        m = rm[:, None] & (cols < c_hi)[None, :]
        x = tl.load(X + r64 * sxr + cols.to(tl.int64)[None, :] * sxc, mask=m, other=0.0)
        acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
    scale = _scale_of(tl.max(acc, axis=1), FMAX)
    tl.store(S + rows.to(tl.int64) * ssr + gc * ssc, scale, mask=rm)
    for c0 in range(c_lo, c_hi, TC):
        cols = c0 + cr
        m = rm[:, None] & (cols < c_hi)[None, :]
        x = tl.load(X + r64 * sxr + cols.to(tl.int64)[None, :] * sxc, mask=m, other=0.0)
        q = _codes(x, scale[:, None], FMAX, DST)
        tl.store(Q + r64 * sqr + cols[None, :], q, mask=m)


@triton.jit
def _quant_tiles_kernel(
    X, Q, S, R, C, sxr, sxc, sqr, ssr, ssc, GR, GC,
    FMAX: tl.constexpr, DST: tl.constexpr, TR: tl.constexpr, TC: tl.constexpr,
):  # fmt: skip
    gr = tl.program_id(0)
    gc = tl.program_id(1)
    r_lo = gr * GR
    r_hi = tl.minimum(R, r_lo + GR)
    c_lo = gc * GC
    c_hi = tl.minimum(C, c_lo + GC)
    rr = tl.arange(0, TR)
    cr = tl.arange(0, TC)
    acc = tl.zeros([TR, TC], tl.float32)
    for r0 in range(r_lo, r_hi, TR):
        rows = r0 + rr
        for c0 in range(c_lo, c_hi, TC):
            cols = c0 + cr
            m = (rows < r_hi)[:, None] & (cols < c_hi)[None, :]
            off = rows.to(tl.int64)[:, None] * sxr + cols.to(tl.int64)[None, :] * sxc
            x = tl.load(X + off, mask=m, other=0.0)
            acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
    scale = _scale_of(tl.max(tl.max(acc, axis=1), axis=0), FMAX)
    tl.store(S + gr.to(tl.int64) * ssr + gc * ssc, scale)
    for r0 in range(r_lo, r_hi, TR):
        rows = r0 + rr
        for c0 in range(c_lo, c_hi, TC):
            cols = c0 + cr
            m = (rows < r_hi)[:, None] & (cols < c_hi)[None, :]
            off = rows.to(tl.int64)[:, None] * sxr + cols.to(tl.int64)[None, :] * sxc
            x = tl.load(X + off, mask=m, other=0.0)
            qo = rows.to(tl.int64)[:, None] * sqr + cols[None, :]
            tl.store(Q + qo, _codes(x, scale, FMAX, DST), mask=m)


@triton.jit
def _amax_partial_kernel(
    X, P, R, C, sxr, sxc, n_tc, n_tiles, per_prog, TR: tl.constexpr, TC: tl.constexpr
):
    pid = tl.program_id(0)
    rr = tl.arange(0, TR)
    cr = tl.arange(0, TC)
    acc = tl.zeros([TR, TC], tl.float32)
    t_hi = tl.minimum(n_tiles, (pid + 1) * per_prog)
    for t in range(pid * per_prog, t_hi):
        rows = (t // n_tc) * TR + rr
        cols = (t % n_tc) * TC + cr
        m = (rows < R)[:, None] & (cols < C)[None, :]
        off = rows.to(tl.int64)[:, None] * sxr + cols.to(tl.int64)[None, :] * sxc
        x = tl.load(X + off, mask=m, other=0.0)
        acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
    tl.store(P + pid, tl.max(tl.max(acc, axis=1), axis=0))


@triton.jit
def _quant_tensor_kernel(
    X, Q, P, S, n_p, R, C, sxr, sxc, sqr, n_tc,
    FMAX: tl.constexpr, DST: tl.constexpr, TR: tl.constexpr, TC: tl.constexpr,
    BP: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0)
    pr = tl.arange(0, BP)
    parts = tl.load(P + pr, mask=pr < n_p, other=0.0)
    scale = _scale_of(tl.max(parts, axis=0), FMAX)
    if t == 0:
        tl.store(S, scale)
    rows = (t // n_tc) * TR + tl.arange(0, TR)
    cols = (t % n_tc) * TC + tl.arange(0, TC)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    off = rows.to(tl.int64)[:, None] * sxr + cols.to(tl.int64)[None, :] * sxc
    x = tl.load(X + off, mask=m, other=0.0)
    qo = rows.to(tl.int64)[:, None] * sqr + cols[None, :]
    tl.store(Q + qo, _codes(x, scale, FMAX, DST), mask=m)


@triton.jit
def _dequant_kernel(
    Q, S, Y, R, C, sqr, sqc, ssr, ssc, syr, syc, GR, GC,
    OUT: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    r64 = rows.to(tl.int64)[:, None]
    c64 = cols.to(tl.int64)[None, :]
    q = tl.load(Q + r64 * sqr + c64 * sqc, mask=m, other=0.0)
    soff = (rows // GR).to(tl.int64)[:, None] * ssr + (cols // GC).to(tl.int64)[None, :] * ssc
    s = tl.load(S + soff, mask=m, other=1.0)
    y = q.to(tl.float32) * s
    tl.store(Y + r64 * syr + c64 * syc, convert(y, OUT), mask=m)


def quantize_fp8(
    x: GPUArray,
    *,
    dtype: Any = "float8_e4m3fn",
    group: tuple[int, int],
    scale_shape: tuple[int, ...],
    out: GPUArray | None = None,
) -> tuple[GPUArray, GPUArray]:
    """(q, scale) with one scale per ``group`` of x's [R, C] view (module docstring)."""
    del out  # two results: the op layer passes none
    dt = as_dt(dtype)
    fmax = _FP8_MAX[dt.name]
    dst = tl_dtype(dt)
    x2, rows, cols, sxr, sxc = as_2d(x, contiguous)
    gr, gc = group
    q = empty(x.shape, dt, x.device)
    nr, nc = cdiv(rows, gr), cdiv(cols, gc)
    scale = empty((nr, nc), "float32", x.device)
    if gr >= rows and gc >= cols:
        _quantize_tensor(x2, q, scale, rows, cols, sxr, sxc, fmax, dst)
    elif gr == 1:
        tr, tc, warps = nd_tile(rows, gc)
        launch(
            _quant_rows_kernel, (cdiv(rows, tr), nc),
            x2, q, scale, rows, cols, sxr, sxc, cols, nc, 1, gc,
            FMAX=fmax, DST=dst, TR=tr, TC=tc, num_warps=warps,
        )  # fmt: skip
    else:
        tr, tc, warps = nd_tile(gr, gc)
        launch(
            _quant_tiles_kernel, (nr, nc),
            x2, q, scale, rows, cols, sxr, sxc, cols, nc, 1, gr, gc,
            FMAX=fmax, DST=dst, TR=tr, TC=tc, num_warps=warps,
        )  # fmt: skip
    return q, scale.view(scale_shape)


def _quantize_tensor(
    x: GPUArray, q: GPUArray, scale: GPUArray, rows: int, cols: int, sxr: int, sxc: int,
    fmax: float, dst: Any,
) -> None:  # fmt: skip
    tr, tc, warps = nd_tile(rows, cols)
    n_tc = cdiv(cols, tc)
    n_tiles = cdiv(rows, tr) * n_tc
    progs = min(n_tiles, 4 * sm_count(x))
    per_prog = cdiv(n_tiles, progs)
    progs = cdiv(n_tiles, per_prog)
    partial = empty((progs,), "float32", x.device)
    launch(
        _amax_partial_kernel, (progs,), x, partial, rows, cols, sxr, sxc, n_tc, n_tiles,
        per_prog, TR=tr, TC=tc, num_warps=warps,
    )  # fmt: skip
    launch(
        _quant_tensor_kernel, (n_tiles,), x, q, partial, scale, progs, rows, cols, sxr, sxc,
        cols, n_tc, FMAX=fmax, DST=dst, TR=tr, TC=tc, BP=next_pow2(progs), num_warps=warps,
    )  # fmt: skip


def dequantize_fp8(
    q: GPUArray,
    scale: GPUArray,
    *,
    out_dtype: Any = "bfloat16",
    group: tuple[int, int],
    out: GPUArray | None = None,
) -> GPUArray:
    """q * scale rounded once to ``out_dtype`` (one scale per ``group`` of q's [R, C] view)."""
    dt = as_dt(out_dtype)
    q2, rows, cols, sqr, sqc = as_2d(q, contiguous)
    gr, gc = group
    s2 = scale.reshape(cdiv(rows, gr), cdiv(cols, gc))
    ssr, ssc = s2.element_strides
    res = new_out(out if out is not None and out.is_contiguous() else None, q.shape, dt, q)
    br, bc, warps = nd_tile(rows, cols)
    launch(
        _dequant_kernel, (cdiv(rows, br), cdiv(cols, bc)),
        q2, s2, res, rows, cols, sqr, sqc, ssr, ssc, cols, 1, gr, gc,
        OUT=tl_dtype(dt), BR=br, BC=bc, num_warps=warps,
    )  # fmt: skip
    if out is not None and res is not out:
        return copy(res, out=out)
    return res
