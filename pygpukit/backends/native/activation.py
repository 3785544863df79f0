"""Activations sigmoid, relu, silu, gelu and the gated silu_mul / gelu_mul on the native
backend: the twins of triton_kernels/activation.py, same signatures and numerics
(native/src/activation/activation.cu on the row-map engine).

Layout: contiguous operands run as one flat row; otherwise every operand is read in place when
its rows step with one stride (the gate/up halves of a fused projection, every other row), else
it is copied first; the result goes straight into out= when out's rows step with one stride.
Dtypes: every operand of one launch has the result dtype; an input of another dtype is converted
first where that is exactly the kernel's own conversion (_common.served_as), e.g. sigmoid of an
integer array (a float32 result) or silu_mul of float16 gate and float32 up.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver
from pygpukit.backends._support.rows import in_rows, out_rows
from pygpukit.backends.cpu._common import float_result as np_float_result
from pygpukit.backends.cpu._common import promote as np_promote
from pygpukit.backends.native._common import served_as, stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["gelu", "gelu_mul", "relu", "sigmoid", "silu", "silu_mul", "softplus"]

_F32 = as_dtype("float32")
_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})
_INTS = frozenset({"int64", "int32", "int16", "int8", "uint8"})


def _launch(
    op: str, kernel: str, xs: tuple[GPUArray, ...], rd: DataType, out: GPUArray | None
) -> GPUArray:
    if rd.name not in _FLOATS and not (op == "relu" and rd.name in _INTS):
        kinds = "float or integer" if op == "relu" else "float"
        raise TypeError(f"{op}: the native kernel computes {kinds} results, not {rd.name}")
    xs = tuple(served_as(op, x, rd) for x in xs)
    x0 = xs[0]
    shape = x0._shape
    y, sy = out_rows(op, out, shape, rd, x0)
    size = x0.size
    if size:
        if y.is_contiguous() and all(x.is_contiguous() for x in xs):
            rows, n = 1, size
            strides = [size] * len(xs)
            sy = size
        else:
            n = shape[-1]
            rows = size // n
            read = [in_rows(x) for x in xs]
            xs = tuple(r[0] for r in read)
            strides = [r[1] for r in read]
        up = xs[1] if len(xs) > 1 else None
        # fmt: off
        extension().activation(
            kernel, x0._device.index, stream_of(x0), rd.name, rows, n,
            xs[0].data_ptr(), strides[0],
            0 if up is None else up.data_ptr(), 0 if up is None else strides[1],
            y.data_ptr(), sy,
        )
        # fmt: on
    return deliver(y, out)


def _float_rd(x: GPUArray, out_dtype: Any) -> DataType:
    if out_dtype is not None:
        return as_dtype(out_dtype)
    return x._dtype if x._dtype.is_floating else _F32


def _approx(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate


def sigmoid(x: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
    """1 / (1 + exp(-x)), overflow-free."""
    return _launch("sigmoid", "sigmoid", (x,), _float_rd(x, out_dtype), out)


def relu(x: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
    """max(x, 0); integers stay integers; NaN stays NaN."""
    rd = x._dtype if out_dtype is None else as_dtype(out_dtype)
    return _launch("relu", "relu", (x,), rd, out)


def silu(x: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
    """x * sigmoid(x)."""
    return _launch("silu", "silu", (x,), _float_rd(x, out_dtype), out)


def softplus(x: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None) -> GPUArray:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
    return _launch("softplus", "softplus", (x,), _float_rd(x, out_dtype), out)


def gelu(
    x: GPUArray, *, approximate: str = "none", out_dtype: Any = None, out: GPUArray | None = None
) -> GPUArray:
    """GELU, exact erf form ("none") or tanh form ("tanh")."""
    kernel = "gelu_" + _approx(approximate)
    return _launch("gelu", kernel, (x,), _float_rd(x, out_dtype), out)


def _gated(
    op: str, kernel: str, gate: GPUArray, up: GPUArray, out_dtype: Any, out: GPUArray | None
) -> GPUArray:
    if out_dtype is None:
        out_dtype = np_float_result(np_promote(gate.dtype.np_dtype, up.dtype.np_dtype))
    if up._shape != gate._shape:
        up = up.broadcast_to(gate._shape)  # as the Triton engine; read with stride 0 or copied
    return _launch(op, kernel, (gate, up), as_dtype(out_dtype), out)


def silu_mul(
    gate: GPUArray, up: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None
) -> GPUArray:
    """silu(gate) * up (SwiGLU), one rounding."""
    return _gated("silu_mul", "silu_mul", gate, up, out_dtype, out)


def gelu_mul(
    gate: GPUArray,
    up: GPUArray,
    *,
    approximate: str = "none",
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """gelu(gate) * up (GeGLU), one rounding."""
    return _gated("gelu_mul", "gelu_mul_" + _approx(approximate), gate, up, out_dtype, out)
