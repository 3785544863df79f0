"""cast and copy (NumPy reference): value conversion with one rounding, and contiguous copies."""

from __future__ import annotations

import numpy as np

from ._common import Array, DTypeLike, finish, is_float

__all__ = ["cast", "convert", "copy"]


def convert(x: Array, dtype: DTypeLike) -> Array:
    dt = np.dtype(dtype)
    x = np.asarray(x)
    # ml_dtypes does not register every pair of casts (e.g. float16 -> bfloat16); going through
    # float32 is exact for any source narrower than float64, so it adds no second rounding.
    if is_float(x.dtype) and x.dtype != np.float64 and x.dtype != dt:
        x = x.astype(np.float32)
    with np.errstate(all="ignore"):
        return x.astype(dt)


def cast(x: Array, *, dtype: DTypeLike) -> Array:
    """x converted to `dtype` with round-to-nearest-even; float -> fp8 out of range gives NaN
    for e4m3fn (it has no inf) and inf for e5m2, as ml_dtypes and torch do."""
    return finish(convert(x, dtype), dtype)


def copy(x: Array) -> Array:
    """A contiguous copy of x (same dtype): the reference for strided copies."""
    return np.array(x, copy=True, order="C")
