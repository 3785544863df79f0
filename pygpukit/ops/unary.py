"""Elementwise unary math: neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh.

neg and abs keep the input dtype (integers stay integers). The transcendental ops return the
input's float dtype, or float32 for integer/bool inputs (torch's rule); they compute in float32
(float64 for float64) and round once.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, float32
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh"]


def float_result(x: GPUArray) -> DataType:
    return x.dtype if x.dtype.kind == "f" else float32


def _float_valued(op: str, x: GPUArray, out: GPUArray | None) -> GPUArray:
    chk.array(op, "x", x)
    chk.computable(op, "x", x)
    rd = float_result(x)
    chk.out_arg(op, out, x.shape, rd)
    return run(op, (x,), {"out_dtype": rd.np_dtype}, out=out)


def _same_type(op: str, x: GPUArray, out: GPUArray | None) -> GPUArray:
    chk.array(op, "x", x)
    chk.computable(op, "x", x, allow_bool=False)
    chk.out_arg(op, out, x.shape, x.dtype)
    return run(op, (x,), {}, out=out)


def neg(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """-x (integers wrap around as two's complement)."""
    return _same_type("neg", x, out)


def abs(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """|x|."""
    return _same_type("abs", x, out)


def exp(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """e**x."""
    return _float_valued("exp", x, out)


def log(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Natural logarithm (log 0 = -inf, log of a negative number = NaN)."""
    return _float_valued("log", x, out)


def sqrt(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Square root."""
    return _float_valued("sqrt", x, out)


def rsqrt(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """1 / sqrt(x)."""
    return _float_valued("rsqrt", x, out)


def sin(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Sine (radians)."""
    return _float_valued("sin", x, out)


def cos(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Cosine (radians)."""
    return _float_valued("cos", x, out)


def tanh(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Hyperbolic tangent."""
    return _float_valued("tanh", x, out)
