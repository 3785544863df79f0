"""Reductions: sum, mean, max, min, argmax (NumPy reference).

`axis` is None (all elements), an int, or a tuple of ints; `keepdims` keeps reduced axes as 1.
Floats accumulate in float32 (float64 for float64), so a float16/bfloat16 sum does not lose
precision to a half-precision accumulator; NumPy's pairwise summation keeps the float32 rounding
error at O(log n) ulps. Integer and bool sums accumulate in int64 and default to an int64
result (torch.sum's rule).
"""

from __future__ import annotations

import numpy as np

from ._common import Array, DTypeLike, compute_dtype, finish, float_result, is_float

__all__ = ["sum", "mean", "max", "min", "argmax"]

Axis = int | tuple[int, ...] | None


def _axis(axis: Axis) -> Axis:
    # NumPy accepts lists only in some reductions; normalise to int or tuple.
    if axis is None or isinstance(axis, int):
        return axis
    return tuple(int(a) for a in axis)


def sum(
    x: Array,
    *,
    axis: Axis = None,
    keepdims: bool = False,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """Sum over `axis`; float results round once from the float32/float64 accumulator."""
    x = np.asarray(x)
    if out_dtype is not None:
        rd = np.dtype(out_dtype)
    elif is_float(x.dtype):
        rd = x.dtype
    else:
        rd = np.dtype(np.int64)
    ct = compute_dtype(rd)
    acc = ct if is_float(ct) or ct == np.uint64 else np.dtype(np.int64)
    with np.errstate(all="ignore"):
        y = np.sum(x.astype(ct), axis=_axis(axis), keepdims=keepdims, dtype=acc)
    return finish(y, rd)


def mean(
    x: Array,
    *,
    axis: Axis = None,
    keepdims: bool = False,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """Arithmetic mean over `axis`; integer inputs give float32 by default."""
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = compute_dtype(rd) if is_float(rd) else np.dtype(np.float64)
    with np.errstate(all="ignore"):
        y = np.mean(x.astype(ct), axis=_axis(axis), keepdims=keepdims, dtype=ct)
    return finish(y, rd)


def _extreme(fn: str, x: Array, axis: Axis, keepdims: bool, out_dtype: DTypeLike | None) -> Array:
    x = np.asarray(x)
    if x.size == 0:
        raise ValueError(f"{fn}: cannot reduce an empty array of shape {x.shape}")
    rd = x.dtype if out_dtype is None else np.dtype(out_dtype)
    # Widening to float32 is exact and order-preserving; ml_dtypes lacks some reduction loops.
    xc = x.astype(compute_dtype(x.dtype))
    reduce = np.max if fn == "max" else np.min
    # NaN propagates (np.max/np.min, like torch.max/torch.min).
    return finish(reduce(xc, axis=_axis(axis), keepdims=keepdims), rd)


def max(
    x: Array,
    *,
    axis: Axis = None,
    keepdims: bool = False,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """Largest element over `axis` (values only); NaN if the slice contains NaN."""
    return _extreme("max", x, axis, keepdims, out_dtype)


def min(
    x: Array,
    *,
    axis: Axis = None,
    keepdims: bool = False,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """Smallest element over `axis` (values only); NaN if the slice contains NaN."""
    return _extreme("min", x, axis, keepdims, out_dtype)


def argmax(x: Array, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index (int64) of the largest element, flat when axis is None; first occurrence on ties;
    a NaN counts as the largest (NumPy and torch agree on this)."""
    x = np.asarray(x)
    if x.size == 0:
        raise ValueError(f"argmax: cannot reduce an empty array of shape {x.shape}")
    xc = x.astype(compute_dtype(x.dtype))
    return finish(np.argmax(xc, axis=axis, keepdims=keepdims), np.int64)
