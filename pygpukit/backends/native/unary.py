"""Elementwise unary math on the native backend: neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh,
the twins of triton_kernels/unary.py, same signatures and numerics (native/src/unary).

neg/abs keep the input dtype (integers wrap in two's complement, abs(INT_MIN) = INT_MIN as in
NumPy); the others give the input's float dtype (float32 for integer/bool inputs), compute in
float32 (float64 for float64) and round once. An input of another dtype than the launch takes is
converted first with the routed cast (integers to float32: the conversion the Triton twin does
in its kernel). Transcendentals are CUDA's accurate math functions; sqrt and rsqrt are correctly
rounded.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import as_dt, compute_name
from pygpukit.backends._support.signatures import unary as _unary_op
from pygpukit.backends.native._libs import extension
from pygpukit.backends.native._map import kernel_inputs, launch
from pygpukit.backends.native.copy import cast
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["abs", "cos", "exp", "log", "neg", "rsqrt", "sin", "sqrt", "tanh"]


def _run(op: str, x: GPUArray, rd: DataType, out: GPUArray | None) -> GPUArray:
    res = out if out is not None else empty(x._shape, rd, x._device)
    got = kernel_inputs([x], rd)
    if got is None or rd.name == "bool":
        # bool/fp8 results: compute in the compute dtype, then convert (bool: != 0 as the
        # Triton twin's store; fp8: the NumPy backend's rounding).
        ct = as_dtype(compute_name(rd))
        tmp = _run(op, x, ct, None)
        return cast(tmp, dtype=rd, out=res)
    in_dt, (xc,) = got
    return launch(extension().unary, op, in_dt.name, res, (xc,))


def _same_type(op: str, x: GPUArray, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    rd = x._dtype if out_dtype is None else as_dt(out_dtype)
    return _run(op, x, rd, out)


def _float_valued(op: str, x: GPUArray, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    if out_dtype is None:
        rd = x._dtype if x._dtype.is_floating else as_dtype("float32")
    else:
        rd = as_dt(out_dtype)
    if not rd.is_floating:
        raise TypeError(f"{op}: the result of {op} needs a floating out_dtype, got {rd.name}")
    return _run(op, x, rd, out)


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
