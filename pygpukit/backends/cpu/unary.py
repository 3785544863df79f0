"""Elementwise unary math (NumPy reference).

neg/abs keep the input dtype (integers stay integers). The transcendental ops give a float
result: the input's dtype for float inputs, float32 for integer/bool inputs (torch's rule).
They compute in float32 (float64 for float64) and round once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._common import Array, DTypeLike, compute_dtype, finish, float_result

__all__ = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh"]


def _same_type(fn: Callable[[Any], Any], x: Array, out_dtype: DTypeLike | None) -> Array:
    x = np.asarray(x)
    rd = x.dtype if out_dtype is None else np.dtype(out_dtype)
    with np.errstate(all="ignore"):
        return finish(fn(x.astype(compute_dtype(rd))), rd)


def _float_valued(fn: Callable[[Any], Any], x: Array, out_dtype: DTypeLike | None) -> Array:
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    # log(0) = -inf, sqrt(-1) = NaN: IEEE results, no host-side warnings (a kernel raises none).
    with np.errstate(all="ignore"):
        return finish(fn(x.astype(compute_dtype(rd))), rd)


def neg(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """-x (integers wrap like two's complement, as on the GPU)."""
    return _same_type(np.negative, x, out_dtype)


def abs(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """|x|."""
    return _same_type(np.abs, x, out_dtype)


def exp(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """e**x."""
    return _float_valued(np.exp, x, out_dtype)


def log(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Natural logarithm."""
    return _float_valued(np.log, x, out_dtype)


def sqrt(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Square root."""
    return _float_valued(np.sqrt, x, out_dtype)


def _rsqrt(x: Any) -> Any:
    return 1.0 / np.sqrt(x)


def rsqrt(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """1 / sqrt(x) (rsqrt(0) = inf)."""
    return _float_valued(_rsqrt, x, out_dtype)


def sin(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Sine (radians)."""
    return _float_valued(np.sin, x, out_dtype)


def cos(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Cosine (radians)."""
    return _float_valued(np.cos, x, out_dtype)


def tanh(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """Hyperbolic tangent."""
    return _float_valued(np.tanh, x, out_dtype)
