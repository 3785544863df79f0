"""The public functions of the map families (elementwise, unary), made once for both GPU homes.

Each home supplies one runner per kind (``run(op, a, b, out_dtype, out)``); these factories turn
it into the family's functions with the contract's names, keyword parameters and docstrings, so
the Triton and native twins cannot drift apart (tests/backends/test_homes.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pygpukit.array import GPUArray

__all__ = ["ARITHMETIC", "COMPARISONS", "SAME_TYPE", "FLOAT_VALUED", "binary", "compare", "unary"]

Fn = Callable[..., GPUArray]

ARITHMETIC = {
    "add": "a + b.",
    "sub": "a - b.",
    "mul": "a * b.",
    "div": "True division (correctly rounded); floating out_dtype only.",
    "maximum": "Elementwise max, NaN-propagating.",
    "minimum": "Elementwise min, NaN-propagating.",
    "pow": "a ** b (the library pow for floats; integers by squaring).",
}
COMPARISONS = {
    "eq": "a == b -> bool.",
    "ne": "a != b -> bool (NaN != NaN).",
    "lt": "a < b -> bool.",
    "le": "a <= b -> bool.",
    "gt": "a > b -> bool.",
    "ge": "a >= b -> bool.",
}
SAME_TYPE = {"neg": "-x.", "abs": "|x|."}
FLOAT_VALUED = {
    "exp": "e**x.",
    "log": "Natural logarithm.",
    "sqrt": "Square root (correctly rounded).",
    "rsqrt": "1 / sqrt(x).",
    "sin": "Sine (radians).",
    "cos": "Cosine (radians).",
    "tanh": "Hyperbolic tangent.",
}


def _named(fn: Fn, op: str, doc: str, runner: Callable[..., Any]) -> Fn:
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    fn.__module__ = runner.__module__
    return fn


def binary(op: str, run: Callable[..., GPUArray]) -> Fn:
    """``op(a, b, *, out_dtype=None, out=None)`` calling ``run(op, a, b, out_dtype, out)``."""

    def fn(a: Any, b: Any, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
        return run(op, a, b, out_dtype, out)

    return _named(fn, op, ARITHMETIC[op], run)


def compare(op: str, run: Callable[..., GPUArray]) -> Fn:
    """``op(a, b, *, out=None)`` calling ``run(op, a, b, out)``."""

    def fn(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
        return run(op, a, b, out)

    return _named(fn, op, COMPARISONS[op], run)


def unary(op: str, run: Callable[..., GPUArray]) -> Fn:
    """``op(x, *, out_dtype=None, out=None)`` calling ``run(op, x, out_dtype, out)``."""

    def fn(x: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
        return run(op, x, out_dtype, out)

    return _named(fn, op, {**SAME_TYPE, **FLOAT_VALUED}[op], run)
