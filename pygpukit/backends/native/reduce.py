"""Reductions sum, mean, max, min, argmax on the native backend: the twins of
triton_kernels/reduce.py, same signatures and numerics (native/src/reduce).

Numerics of pygpukit/backends/cpu/reduce.py: floats accumulate in float32 (float64 for float64)
and round once; integer/bool sums accumulate in int64 (wrapping, order-independent), integer
means in float64; max/min propagate NaN; argmax returns the first index of the maximum, a NaN
counting as the largest. Deterministic: a fixed combination order, no atomics.

Plan (as the Triton twin): x is viewed as [A, K, B] (kept dims before the reduced ones, the
reduced ones, kept dims after), each group collapsed to one strided dim; non-adjacent axes are
permuted to the end, and a layout whose groups do not collapse is copied contiguous first. When
B == 1 the A dim takes B's place, so short rows are packed several to a block. Threads step
along whichever of K and B is contiguous (coalesced reads). When the outputs are too few to fill
the GPU, K is split over several blocks writing partials to a pool workspace, and a second
launch of the same kernel reduces them.

An out_dtype other than the natural result (a direct call only; the op layer never passes one)
gives the Triton twin's values: for sum/mean the input is first converted to the compute dtype
of that result (the routed cast), the result is stored in it with one conversion.
"""

from __future__ import annotations

import builtins
from typing import Any

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.collapse import reduce_axes, reduce_view
from pygpukit.backends._support.dtypes import as_dt, compute_name
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.backends.native.copy import contiguous, copy
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["argmax", "max", "mean", "min", "sum"]

_bmin, _bmax = builtins.min, builtins.max  # this module defines min/max
_THREADS = 256


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sm_count(x: GPUArray) -> int:
    return runtime.sm_count(x._device)


def _natural(op: str, dt: DataType) -> DataType:
    """The result dtype of op on dt without an out_dtype."""
    if op == "argmax":
        return as_dtype("int64")
    if op in ("max", "min") or dt.is_floating:
        return dt
    return as_dtype("int64" if op == "sum" else "float32")


def _acc_name(op: str, dt: DataType) -> str:
    """The accumulator dtype of the sum/mean kernels for input dtype dt."""
    if dt.is_floating:
        return compute_name(dt)
    return "float64" if op == "mean" else "int64"


def _reduce(op: str, x: GPUArray, axis: Any, keepdims: bool, rd: DataType, out: Any) -> GPUArray:
    axes, oshape = reduce_axes(x._shape, axis, keepdims)
    y = out if out is not None and out.is_contiguous() else empty(oshape, rd, x._device)
    if y.size:
        if op in ("sum", "mean") and rd is not _natural(op, x._dtype):
            # The Triton twin converts every element to the compute dtype of the result first.
            ct = as_dtype("bool" if rd.name == "bool" else compute_name(rd))
            if x._dtype is not ct:
                x = x.astype(ct)
        _run(op, x, axes, rd, y)
    if out is not None and y is not out:
        return copy(y, out=out)
    return y


def _layout_for(k: int, b: int, sk: int, sb: int) -> tuple[int, int, bool]:
    """(kt, bt, kfast): threads along K and along B, and which of them neighbouring threads
    step along (the contiguous one, so reads coalesce)."""
    if sb == 1 and b > 1:
        bt = _bmin(_pow2(b), _THREADS)
        return _bmin(_THREADS // bt, _pow2(k)), bt, False
    kt = _bmin(_pow2(k), _THREADS)
    return kt, _bmin(_THREADS // kt, _pow2(b)), True


def _run(op: str, x: GPUArray, axes: tuple[int, ...], rd: DataType, y: GPUArray) -> None:
    x, ((a, sa), (k, sk), (b, sb)) = reduce_view(x, axes, contiguous)
    if b == 1 and a > 1:  # rows: walk A in the B slot
        a, sa, b, sb = 1, 0, a, sa
    kt, bt, kfast = _layout_for(k, b, sk, sb)
    tiles = a * _cdiv(b, bt)
    nsm = _sm_count(x)
    splits = 1
    if tiles < 2 * nsm and k > 8 * kt:  # too few blocks to fill the GPU: split K
        splits = _bmin(_cdiv(k, 4 * kt), _cdiv(4 * nsm, tiles))
    k_chunk = _bmax(1, _cdiv(k, splits))
    splits = _bmax(1, _cdiv(k, k_chunk))
    ext = extension()
    dev, stream = x._device.index, stream_of(x)
    xd = x._dtype.name
    if splits == 1:
        # fmt: off
        ext.reduce(dev, stream, op, xd, rd.name, a, k, b, sa, sk, sb, x.data_ptr(), 0,
                   y.data_ptr(), 0, kt, bt, kfast, 1, k_chunk, float(k), True)
        # fmt: on
        return
    # Partials [a, splits, b]: sums in their accumulator dtype, max/min/argmax values in x's
    # dtype (exact) with int64 indices; then the same kernel reduces them over splits.
    ws_name = _acc_name(op, x._dtype) if op in ("sum", "mean") else xd
    ws = empty((a * splits * b,), ws_name, x._device)
    wi = empty((a * splits * b,), "int64", x._device) if op == "argmax" else None
    wi_ptr = 0 if wi is None else wi.data_ptr()
    # fmt: off
    ext.reduce(dev, stream, op, xd, ws_name, a, k, b, sa, sk, sb, x.data_ptr(), 0,
               ws.data_ptr(), wi_ptr, kt, bt, kfast, splits, k_chunk, float(k), False)
    kt2, bt2, kfast2 = _layout_for(splits, b, b, 1)
    ext.reduce(dev, stream, op, ws_name, rd.name, a, splits, b, splits * b, b, 1, ws.data_ptr(),
               wi_ptr, y.data_ptr(), 0, kt2, bt2, kfast2, 1, splits, float(k), True)
    # fmt: on


def _sum_rd(x: GPUArray, out_dtype: Any) -> DataType:
    if out_dtype is not None:
        return as_dt(out_dtype)
    return x._dtype if x._dtype.is_floating else as_dtype("int64")


def sum(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Sum over ``axis`` (None: every element; an int or a tuple of ints)."""
    return _reduce("sum", x, axis, keepdims, _sum_rd(x, out_dtype), out)


def mean(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Arithmetic mean over ``axis``; integers give float32 by default."""
    rd = as_dt(out_dtype) if out_dtype is not None else _natural("mean", x._dtype)
    return _reduce("mean", x, axis, keepdims, rd, out)


def max(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Largest value over ``axis`` (NaN if the slice holds one)."""
    rd = x._dtype if out_dtype is None else as_dt(out_dtype)
    return _reduce("max", x, axis, keepdims, rd, out)


def min(
    x: GPUArray, *, axis: Any = None, keepdims: bool = False, out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:  # fmt: skip
    """Smallest value over ``axis`` (NaN if the slice holds one)."""
    rd = x._dtype if out_dtype is None else as_dt(out_dtype)
    return _reduce("min", x, axis, keepdims, rd, out)


def argmax(
    x: GPUArray, *, axis: int | None = None, keepdims: bool = False, out: GPUArray | None = None
) -> GPUArray:
    """int64 index of the first maximum (flat index when axis is None); NaN is the largest."""
    return _reduce("argmax", x, axis, keepdims, as_dtype("int64"), out)
