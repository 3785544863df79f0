"""Reductions: sum, sum_axis, mean, max, min, argmax.

`axis` is None (every element), an int, or a tuple of ints; the result is a GPUArray (0-d for a
full reduction). Float sums and means accumulate in float32 (float64 for float64) and round
once, so float16/bfloat16 sums do not lose precision to a half-precision accumulator. Integer and
bool sums give int64 (torch.sum); mean of integers gives float32. max/min return values only
(use argmax for the index); NaN propagates; reducing an empty axis raises ValueError.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, float32, int64
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["sum", "sum_axis", "mean", "max", "min", "argmax"]


def _prepare(
    op: str, x: GPUArray, axis: Any, keepdims: bool
) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    chk.array(op, "x", x)
    chk.computable(op, "x", x)
    if not isinstance(keepdims, bool):
        raise TypeError(f"{op}: keepdims must be a bool, got {type(keepdims).__name__}")
    axes = chk.axes_arg(op, axis, x.ndim)
    return axes, chk.reduced_shape(x.shape, axes, keepdims)


def _run(
    op: str,
    x: GPUArray,
    axes: tuple[int, ...] | None,
    keepdims: bool,
    rd: DataType,
    shape: tuple[int, ...],
    out: GPUArray | None,
) -> GPUArray:
    chk.out_arg(op, out, shape, rd)
    params = {"axis": axes, "keepdims": keepdims, "out_dtype": rd.np_dtype}
    return run(op, (x,), params, out=out)


def sum(
    x: GPUArray, axis: Any = None, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """Sum over `axis` (all elements when None)."""
    axes, shape = _prepare("sum", x, axis, keepdims)
    rd = x.dtype if x.dtype.kind == "f" else int64
    return _run("sum", x, axes, keepdims, rd, shape, out)


def sum_axis(
    x: GPUArray, axis: int, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """Sum over one axis (the 0.2.x form of sum(x, axis=axis))."""
    if axis is None:
        raise TypeError("sum_axis: axis must be an int; use sum(x) for a full reduction")
    return sum(x, axis, keepdims, out=out)


def mean(
    x: GPUArray, axis: Any = None, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """Arithmetic mean over `axis`."""
    axes, shape = _prepare("mean", x, axis, keepdims)
    if _reduces_empty(x, axes):
        raise ValueError(f"mean: cannot average over an empty axis (x has {chk.desc(x)})")
    rd = x.dtype if x.dtype.kind == "f" else float32
    return _run("mean", x, axes, keepdims, rd, shape, out)


def _reduces_empty(x: GPUArray, axes: tuple[int, ...] | None) -> bool:
    if axes is None:
        return x.size == 0
    return any(x.shape[a] == 0 for a in axes)


def _extreme(op: str, x: GPUArray, axis: Any, keepdims: bool, out: GPUArray | None) -> GPUArray:
    axes, shape = _prepare(op, x, axis, keepdims)
    if _reduces_empty(x, axes):
        raise ValueError(f"{op}: cannot reduce an empty axis (x has {chk.desc(x)})")
    return _run(op, x, axes, keepdims, x.dtype, shape, out)


def max(
    x: GPUArray, axis: Any = None, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """Largest value over `axis`."""
    return _extreme("max", x, axis, keepdims, out)


def min(
    x: GPUArray, axis: Any = None, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """Smallest value over `axis`."""
    return _extreme("min", x, axis, keepdims, out)


def argmax(
    x: GPUArray, axis: int | None = None, keepdims: bool = False, *, out: GPUArray | None = None
) -> GPUArray:
    """int64 index of the largest value (flat index when axis is None); first one on ties; NaN
    counts as the largest."""
    op = "argmax"
    chk.array(op, "x", x)
    chk.computable(op, "x", x)
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"{op}: axis must be an int or None, got {axis!r}")
    axes, shape = _prepare(op, x, axis, keepdims)
    if _reduces_empty(x, axes):
        raise ValueError(f"{op}: cannot reduce an empty axis (x has {chk.desc(x)})")
    chk.out_arg(op, out, shape, int64)
    ax = None if axes is None else axes[0]
    return run(op, (x,), {"axis": ax, "keepdims": keepdims}, out=out)
