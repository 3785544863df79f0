"""Elementwise binary ops, comparisons, where and clamp (NumPy reference).

Inputs broadcast like NumPy. `out_dtype` is the result dtype the op layer decided with
pygpukit.dtypes.result_type (weak Python scalars, torch-style); when it is None the fallback
`promote` rule of _common is used. Arithmetic runs in compute_dtype(out_dtype): float64 for a
float64 result, float32 for any other float result, the integer type for integer results; the
result is rounded once, as a fused GPU kernel with float32 math would do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._common import (
    Array,
    DTypeLike,
    compute_dtype,
    finish,
    float_compute_dtype,
    float_result,
    is_float,
    promote,
    upcast,
)
from .copy import convert

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "where",
    "clamp",
]

_Fn = Callable[[Any, Any], Any]


def _binary(fn: _Fn, a: Array, b: Array, out_dtype: DTypeLike | None) -> Array:
    a, b = np.asarray(a), np.asarray(b)
    rd = promote(a.dtype, b.dtype) if out_dtype is None else np.dtype(out_dtype)
    # GPU kernels do not trap on overflow, 0/0 or inf-inf; neither does the reference.
    with np.errstate(all="ignore"):
        y = fn(upcast(a, rd), upcast(b, rd))
    return finish(y, rd)


def add(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """a + b."""
    return _binary(np.add, a, b, out_dtype)


def sub(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """a - b."""
    return _binary(np.subtract, a, b, out_dtype)


def mul(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """a * b."""
    return _binary(np.multiply, a, b, out_dtype)


def div(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """True division a / b; integer inputs give float32 by default (torch's true_divide)."""
    a, b = np.asarray(a), np.asarray(b)
    rd = float_result(promote(a.dtype, b.dtype)) if out_dtype is None else np.dtype(out_dtype)
    if not is_float(rd):
        raise TypeError(f"div: true division needs a floating out_dtype, got {rd}")
    ct = float_compute_dtype(rd)
    with np.errstate(all="ignore"):
        y = np.true_divide(a.astype(ct), b.astype(ct))
    return finish(y, rd)


def maximum(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Elementwise max; a NaN in either operand gives NaN (torch.maximum semantics)."""
    return _binary(np.maximum, a, b, out_dtype)


def minimum(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Elementwise min; a NaN in either operand gives NaN (torch.minimum semantics)."""
    return _binary(np.minimum, a, b, out_dtype)


def pow(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """a ** b; integers raised to negative integer powers raise ValueError (as torch does)."""
    return _binary(np.power, a, b, out_dtype)


def _compare(fn: _Fn, a: Array, b: Array) -> Array:
    a, b = np.asarray(a), np.asarray(b)
    # Compare in the common compute type: widening half/bf16/fp8 to float32 preserves order.
    ct = compute_dtype(promote(a.dtype, b.dtype))
    return finish(fn(a.astype(ct), b.astype(ct)), np.bool_)


def eq(a: Array, b: Array) -> Array:
    """a == b -> bool."""
    return _compare(np.equal, a, b)


def ne(a: Array, b: Array) -> Array:
    """a != b -> bool (NaN != NaN is True)."""
    return _compare(np.not_equal, a, b)


def lt(a: Array, b: Array) -> Array:
    """a < b -> bool."""
    return _compare(np.less, a, b)


def le(a: Array, b: Array) -> Array:
    """a <= b -> bool."""
    return _compare(np.less_equal, a, b)


def gt(a: Array, b: Array) -> Array:
    """a > b -> bool."""
    return _compare(np.greater, a, b)


def ge(a: Array, b: Array) -> Array:
    """a >= b -> bool."""
    return _compare(np.greater_equal, a, b)


def where(cond: Array, a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """cond ? a : b with broadcasting. Selection is exact: each operand is converted once to
    the result dtype (through float32 for half-precision sources, which is exact)."""
    cond, a, b = np.asarray(cond), np.asarray(a), np.asarray(b)
    rd = promote(a.dtype, b.dtype) if out_dtype is None else np.dtype(out_dtype)
    return finish(np.where(cond.astype(np.bool_), convert(a, rd), convert(b, rd)), rd)


def clamp(
    x: Array,
    min: Array | float | None = None,
    max: Array | float | None = None,
    *,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """min(max(x, min), max), each bound optional. NaN in x stays NaN; if min > max every
    element becomes max (torch.clamp semantics). Default result dtype: x's dtype."""
    x = np.asarray(x)
    rd = x.dtype if out_dtype is None else np.dtype(out_dtype)
    ct = compute_dtype(rd)
    y = x.astype(ct)
    with np.errstate(all="ignore"):
        if min is not None:
            y = np.maximum(y, np.asarray(min).astype(ct))
        if max is not None:
            y = np.minimum(y, np.asarray(max).astype(ct))
    return finish(y, rd)
