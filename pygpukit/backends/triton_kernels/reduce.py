"""Reductions sum, mean, max, min, argmax over all elements, one axis or a set of axes.

Numerics of pygpukit/backends/cpu/reduce.py: floats accumulate in float32 (float64 for float64)
and round once; integer/bool sums accumulate in int64 (wrapping, order-independent); mean
divides the sum by the count in the accumulator type; max/min propagate NaN; argmax returns the
first index of the maximum, a NaN counting as the largest (its first occurrence wins).

Design: the input is viewed as [A, K, B] (A = kept dims before the reduced ones, K = reduced,
B = kept dims after), each group collapsed to one strided dim (non-adjacent axes are permuted to
the end; layouts that do not collapse get a contiguous copy). A program reduces a
[BLOCK_K, BLOCK_B] tile stream for one a and BLOCK_B outputs, accumulating elementwise in
registers (a blocked pairwise-like sum) and reducing the tile once at the end; when B == 1 (a
last-axis or full reduction) the A dim plays the role of B so short rows are still packed
BLOCK_B to a program. When the output is too small to fill the GPU, K is split over several
programs writing partials to a workspace, and a second launch of the same kernel (IDX_IN for
argmax) combines them: two launches, no atomics, deterministic.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import triton
import triton.language as tl

from pygpukit import determinism
from pygpukit.backends._support.collapse import reduce_axes, reduce_view
from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    as_dt,
    cdiv,
    compute_tl,
    next_pow2,
    sm_count,
)
from pygpukit.backends.triton_kernels.copy import contiguous, copy
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty

__all__ = ["argmax", "max", "mean", "min", "sum"]

_bmin, _bmax = builtins.min, builtins.max  # this module defines min/max


@triton.jit
def _reduce_kernel(
    X, XI, Y, YI, K, B, sa, sk, sb, k_chunk, n_bb, S, count,
    OP: tl.constexpr, CT: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr,
    IDX_IN: tl.constexpr, FINAL: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_B: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    split = pid % S
    t = pid // S
    a = t // n_bb
    bs = (t % n_bb) * BLOCK_B + tl.arange(0, BLOCK_B)
    bm = bs < B
    k_lo = split * k_chunk
    k_hi = tl.minimum(K, k_lo + k_chunk)
    base = X + a.to(tl.int64) * sa
    boff = bs.to(tl.int64)[None, :] * sb
    kr = tl.arange(0, BLOCK_K)
    if OP == "argmax":
        bv = tl.full([BLOCK_K, BLOCK_B], IDENT, CT)
        bi = tl.full([BLOCK_K, BLOCK_B], -1, tl.int64)
    else:
        acc = tl.full([BLOCK_K, BLOCK_B], IDENT, ACC)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        ks = (k0 + kr).to(tl.int64)[:, None]
        m = (ks < k_hi) & bm[None, :]
        off = ks * sk + boff
        v = tl.load(base + off, mask=m, other=0).to(CT)
        if OP == "argmax":
            if IDX_IN:
                idx = tl.load(XI + a.to(tl.int64) * sa + off, mask=m, other=0)
            else:
                idx = ks + tl.zeros([BLOCK_K, BLOCK_B], tl.int64)
            better = v > bv
            if CT.is_floating():
                better = better | ((v != v) & (bv == bv))
            take = m & ((bi < 0) | better)  # strictly better: the earlier index keeps ties
            bv = tl.where(take, v, bv)
            bi = tl.where(take, idx, bi)
        elif OP == "max":
            v = tl.where(m, v.to(ACC), IDENT)
            if ACC.is_floating():
                acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)
            else:
                acc = tl.maximum(acc, v)
        elif OP == "min":
            v = tl.where(m, v.to(ACC), IDENT)
            if ACC.is_floating():
                acc = tl.minimum(acc, v, propagate_nan=tl.PropagateNan.ALL)
            else:
                acc = tl.minimum(acc, v)
        else:
            acc += tl.where(m, v.to(ACC), 0)
    if OP == "argmax":
        have = bi >= 0
        if CT.is_floating():
            isn = have & (bv != bv)
            any_nan = tl.max(isn.to(tl.int32), axis=0) > 0
            mv = tl.max(tl.where(have & ~isn, bv, IDENT), axis=0)
            cand = have & tl.where(any_nan[None, :], isn, bv == mv[None, :])
            r = tl.where(any_nan, float("nan"), mv)
        else:
            mv = tl.max(tl.where(have, bv, IDENT), axis=0)
            cand = have & (bv == mv[None, :])
            r = mv
        ri = tl.min(tl.where(cand, bi, 2**62), axis=0)
    elif OP == "max" or OP == "min":
        if OP == "max":
            r = tl.max(acc, axis=0)
        else:
            r = tl.min(acc, axis=0)
        if ACC.is_floating():
            r = tl.where(tl.max((acc != acc).to(tl.int32), axis=0) > 0, float("nan"), r)
    else:
        r = tl.sum(acc, axis=0)
    if FINAL:
        yo = a.to(tl.int64) * B + bs
        if OP == "argmax":
            tl.store(Y + yo, ri, mask=bm)
        elif OP == "mean":
            tl.store(Y + yo, (r / count).to(Y.dtype.element_ty), mask=bm)
        else:
            tl.store(Y + yo, r.to(Y.dtype.element_ty), mask=bm)
    else:
        wo = (a.to(tl.int64) * S + split) * B + bs
        tl.store(Y + wo, r.to(Y.dtype.element_ty), mask=bm)
        if OP == "argmax":
            tl.store(YI + wo, ri, mask=bm)


_TL_NAME = {
    tl.float64: "float64",
    tl.float32: "float32",
    tl.int64: "int64",
    tl.int32: "int32",
    tl.int16: "int16",
    tl.int8: "int8",
    tl.uint8: "uint8",
    tl.int1: "bool",
}


def _ident(op: str, dt: Any) -> Any:
    """Identity of the accumulator: 0 for sums, the lowest/highest value for max/min/argmax."""
    if op in ("sum", "mean"):
        return 0
    if dt.is_floating():
        return float("-inf") if op in ("max", "argmax") else float("inf")
    info = np.iinfo(np.int32 if dt == tl.int1 else getattr(np, _TL_NAME[dt]))
    return int(info.min) if op in ("max", "argmax") else int(info.max)


def _reduce(op: str, x: GPUArray, axis: Any, keepdims: bool, rd: Any, out: GPUArray | None) -> Any:
    axes, oshape = reduce_axes(x.shape, axis, keepdims)
    y = out if out is not None and out.is_contiguous() else empty(oshape, rd, x.device)
    if y.size:
        _run(op, x, axes, rd, y)
    if out is not None and y is not out:
        return copy(y, out=out)
    return y


def _run(op: str, x: GPUArray, axes: tuple[int, ...], rd: Any, y: GPUArray) -> None:
    x, ((a, sa), (k, sk), (b, sb)) = reduce_view(x, axes, contiguous)
    if b == 1 and a > 1:  # rows: walk A in the B slot of the tile
        a, sa, b, sb = 1, 0, a, sa
    if op in ("sum", "mean"):
        ct = tl.int1 if rd.name == "bool" else compute_tl(rd)
        acc = ct if ct.is_floating() else tl.int64
        if op == "mean" and not ct.is_floating():
            ct = acc = tl.float64
    else:
        ct = acc = compute_tl(x.dtype)
    ident = _ident(op, acc if op != "argmax" else ct)
    # Tile of up to 4096 elements: coalesced along B when B is the contiguous dim, else along K.
    # The deterministic mode: one tile shape and no split for every call with this K, so an
    # output element's reduction order never follows the number of outputs.
    det = determinism._on[0]
    if det:
        bb, bk = 16, _bmin(next_pow2(k), 256)
    elif sb == 1 and b > 1:
        bb = _bmin(next_pow2(b), 256)
        bk = _bmin(next_pow2(k), _bmax(1, 4096 // bb))
    else:
        bk = _bmin(next_pow2(k), 4096)
        bb = _bmin(next_pow2(b), _bmax(1, 4096 // bk))
    n_bb = cdiv(b, bb)
    tiles = a * n_bb
    nsm = sm_count(x)
    splits = 1
    if tiles < 2 * nsm and k > 2 * bk and not det:  # too few programs to fill the GPU: split K
        splits = _bmin(cdiv(k, bk), cdiv(4 * nsm, tiles))
    k_chunk = cdiv(cdiv(k, splits), bk) * bk if k else bk
    splits = _bmax(1, cdiv(k, k_chunk))
    warps = 8 if bk * bb >= 4096 else 4
    meta = dict(OP=op, CT=ct, ACC=acc, IDENT=ident, BLOCK_K=bk, BLOCK_B=bb, num_warps=warps)
    if splits == 1:
        launch(
            _reduce_kernel, (tiles,), x, x, y, y, k, b, sa, sk, sb, k_chunk, n_bb, 1, k,
            IDX_IN=False, FINAL=True, **meta,
        )  # fmt: skip
        return
    ws_t = ct if op == "argmax" else acc
    ws = empty((a * splits * b,), _TL_NAME[ws_t], x.device)
    wi = empty((a * splits * b,), "int64", x.device) if op == "argmax" else ws
    launch(
        _reduce_kernel, (tiles * splits,), x, x, ws, wi, k, b, sa, sk, sb, k_chunk, n_bb,
        splits, k, IDX_IN=False, FINAL=False, **meta,
    )  # fmt: skip
    # Combine the partials [a, splits, b] over splits with the same kernel, in the accumulator
    # type (mean: the partials are sums; the final pass divides by the full count k).
    bk2 = _bmin(next_pow2(splits), _bmax(1, 4096 // bb))
    meta2 = dict(meta, CT=ws_t, ACC=ws_t, BLOCK_K=bk2)
    launch(
        _reduce_kernel, (tiles,), ws, wi, y, y, splits, b, splits * b, b, 1, splits, n_bb, 1, k,
        IDX_IN=op == "argmax", FINAL=True, **meta2,
    )  # fmt: skip


def _sum_rd(x: GPUArray, out_dtype: Any) -> Any:
    if out_dtype is not None:
        return as_dt(out_dtype)
    return x.dtype if x.dtype.is_floating else as_dt("int64")


def sum(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Sum over ``axis`` (None: every element; an int or a tuple of ints)."""
    return _reduce("sum", x, axis, keepdims, _sum_rd(x, out_dtype), out)  # type: ignore[no-any-return]


def mean(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Arithmetic mean over ``axis``; integers give float32 by default."""
    rd = (
        as_dt(out_dtype)
        if out_dtype is not None
        else (x.dtype if x.dtype.is_floating else as_dt("float32"))
    )
    return _reduce("mean", x, axis, keepdims, rd, out)  # type: ignore[no-any-return]


def max(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Largest value over ``axis`` (NaN if the slice holds one)."""
    rd = x.dtype if out_dtype is None else as_dt(out_dtype)
    return _reduce("max", x, axis, keepdims, rd, out)  # type: ignore[no-any-return]


def min(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Smallest value over ``axis`` (NaN if the slice holds one)."""
    rd = x.dtype if out_dtype is None else as_dt(out_dtype)
    return _reduce("min", x, axis, keepdims, rd, out)  # type: ignore[no-any-return]


def argmax(
    x: GPUArray, *, axis: int | None = None, keepdims: bool = False, out: GPUArray | None = None
) -> GPUArray:
    """int64 index of the first maximum (flat index when axis is None); NaN is the largest."""
    return _reduce("argmax", x, axis, keepdims, as_dt("int64"), out)  # type: ignore[no-any-return]
