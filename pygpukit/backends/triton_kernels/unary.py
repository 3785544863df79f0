"""Elementwise unary math: neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh (on the _map engine).

Semantics of pygpukit/backends/cpu/unary.py: neg/abs keep the input dtype (integers wrap in two's
complement, abs(INT_MIN) = INT_MIN as in NumPy); the others give the input's float dtype (float32
for integer/bool inputs), compute in float32 (float64 for float64) and round once.
Accuracy: the transcendental functions use libdevice (CUDA's accurate ~1-2 ulp versions, not the
approximate PTX instructions); sqrt and rsqrt are correctly rounded (sqrt.rn, div.rn).
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from pygpukit.backends._support.signatures import unary as _unary_op
from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    as_dt,
    compute_tl,
    float_result,
    libdevice,
    new_out,
)
from pygpukit.backends.triton_kernels._map import run_map

__all__ = ["abs", "cos", "exp", "log", "neg", "rsqrt", "sin", "sqrt", "tanh"]


@triton.jit
def _unary_fn(a, b, c, CT: tl.constexpr, OP: tl.constexpr):
    x = a.to(CT)
    if OP == "neg":
        r = -x
    elif OP == "abs":
        if CT.is_floating():
            r = tl.abs(x)  # clears the sign bit: abs(-0.0) = +0.0, NaN stays NaN
        else:
            r = tl.where(x < 0, -x, x)  # wraps at INT_MIN like NumPy
    elif OP == "exp":
        r = libdevice.exp(x)
    elif OP == "log":
        r = libdevice.log(x)
    elif OP == "sqrt":
        if CT == tl.float32:
            r = tl.sqrt_rn(x)
        else:
            r = tl.sqrt(x)
    elif OP == "rsqrt":
        if CT == tl.float32:
            r = tl.div_rn(tl.full(x.shape, 1.0, CT), tl.sqrt_rn(x))
        else:
            r = 1.0 / tl.sqrt(x)
    elif OP == "sin":
        r = libdevice.sin(x)
    elif OP == "cos":
        r = libdevice.cos(x)
    else:
        r = libdevice.tanh(x)
    return r


def _same_type(op: str, x: GPUArray, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    rd = x.dtype if out_dtype is None else as_dt(out_dtype)
    res = new_out(out, x.shape, rd, x)
    return run_map(_unary_fn, op, compute_tl(rd), res, (x,))


def _float_valued(op: str, x: GPUArray, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    rd = float_result(x.dtype) if out_dtype is None else as_dt(out_dtype)
    res = new_out(out, x.shape, rd, x)
    return run_map(_unary_fn, op, compute_tl(rd), res, (x,))


# The family's public functions (the contract in _support/signatures.py).
neg = _unary_op("neg", _same_type)
abs = _unary_op("abs", _same_type)
exp = _unary_op("exp", _float_valued)
log = _unary_op("log", _float_valued)
sqrt = _unary_op("sqrt", _float_valued)
rsqrt = _unary_op("rsqrt", _float_valued)
sin = _unary_op("sin", _float_valued)
cos = _unary_op("cos", _float_valued)
tanh = _unary_op("tanh", _float_valued)
