"""RMSNorm (with the fused residual add) and LayerNorm on the native backend: the twins of
triton_kernels/norm.py, same signatures and numerics (native/src/norm/norm.cu).

x is read in place when its rows step with one stride (last dim contiguous), else copied
first; y and h come out contiguous (an out= of another layout receives a copy).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends._support.rows import as_rows
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty
from pygpukit.dtypes import as_dtype

__all__ = ["layernorm", "rmsnorm"]


def _result(x: GPUArray, out_dtype: Any) -> None:
    if out_dtype is not None and as_dtype(out_dtype) is not x._dtype:
        raise TypeError(
            f"native norms write x's dtype {x._dtype.name}; out_dtype={out_dtype!r} is not served"
        )


def rmsnorm(
    x: GPUArray,
    weight: GPUArray,
    residual: GPUArray | None = None,
    *,
    eps: float = 1e-6,
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """y = x / sqrt(mean(x^2) + eps) * weight; with residual returns (y, h), h = x + residual."""
    _result(x, out_dtype)
    x, rows, n, sx = as_rows(x)
    y = target(out, x.shape, x._dtype, x)
    h = empty(x.shape, x._dtype, x._device) if residual is not None else None
    r_ptr, sr = 0, 0
    if residual is not None:
        residual, _, _, sr = as_rows(residual)
        r_ptr = residual.data_ptr()
    # fmt: off
    extension().rmsnorm(
        x._device.index, stream_of(x), x._dtype.name, weight._dtype.name, rows, n,
        x.data_ptr(), sx, weight.data_ptr(), weight._estrides[0], r_ptr, sr,
        y.data_ptr(), 0 if h is None else h.data_ptr(), float(eps),
    )
    # fmt: on
    y = deliver(y, out)
    return (y, h) if h is not None else y


def layernorm(
    x: GPUArray,
    weight: GPUArray | None = None,
    bias: GPUArray | None = None,
    *,
    eps: float = 1e-5,
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    _result(x, out_dtype)
    if weight is not None and bias is not None and weight._dtype is not bias._dtype:
        # One parameter dtype per launch: both in x's compute type, which is what the reference
        # converts them to before use (float32, float64 for float64), so nothing changes.
        ct = "float64" if x._dtype.name == "float64" else "float32"
        weight, bias = weight.astype(ct), bias.astype(ct)
    x, rows, n, sx = as_rows(x)
    y = target(out, x.shape, x._dtype, x)
    par = weight if weight is not None else bias
    # fmt: off
    extension().layernorm(
        x._device.index, stream_of(x), x._dtype.name,
        (par._dtype if par is not None else x._dtype).name, rows, n, x.data_ptr(), sx,
        0 if weight is None else weight.data_ptr(), 0 if weight is None else weight._estrides[0],
        0 if bias is None else bias.data_ptr(), 0 if bias is None else bias._estrides[0],
        y.data_ptr(), float(eps),
    )
    # fmt: on
    return deliver(y, out)
