"""softmax(scale * x) along an axis, with the end-aligned causal mask, on the native backend:
the twin of triton_kernels/softmax.py, same signature and numerics
(native/src/softmax/softmax.cu).

The last axis: x is read in place when its rows step with one stride, y goes straight into out=
when out's rows do. Another axis: x (made contiguous if it is not) is read as [outer, n, inner]
by a kernel that runs along the axis with stride inner, so nothing is transposed; the result is
contiguous in x's shape. A float64 scale stays float64 (the Triton kernel passes it as float32).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver
from pygpukit.backends._support.rows import in_rows, out_rows
from pygpukit.backends.native._common import served_as, stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.dtypes import as_dtype

__all__ = ["softmax"]

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})


def softmax(
    x: GPUArray,
    *,
    axis: int = -1,
    scale: float | None = None,
    causal: bool = False,
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """softmax(scale * x) along ``axis``; causal=True needs axis=-1 and x with >= 2 dims."""
    nd = x.ndim
    ax = axis % nd if nd else 0
    if causal and (nd < 2 or ax != nd - 1):
        raise ValueError("softmax: causal=True needs x with >= 2 dims and axis=-1")
    if out_dtype is not None:
        rd = as_dtype(out_dtype)
    else:
        rd = x._dtype if x._dtype.is_floating else as_dtype("float32")
    if rd.name not in _FLOATS:
        raise TypeError(f"softmax: the native kernel computes float results, not {rd.name}")
    x = served_as("softmax", x, rd)
    shape = x._shape
    inner = 1
    for d in shape[ax + 1 :]:
        inner *= d
    sc = 1.0 if scale is None else float(scale)  # x * 1.0 is exact: no flag needed
    if inner > 1:
        return _along(x, ax, inner, sc, out)
    if ax != nd - 1 and nd:
        # Only size-1 dims follow the axis: it is the last axis of a view without them.
        y = softmax(x.reshape(shape[: ax + 1]), scale=scale, out_dtype=rd).reshape(shape)
        return deliver(y, out)
    y, sy = out_rows("softmax", out, shape, rd, x)
    n = shape[-1] if nd else 1
    if x.size:
        x, sx = in_rows(x)
        # fmt: off
        extension().softmax(
            x._device.index, stream_of(x), rd.name, x.size // n, n, x.data_ptr(), sx,
            y.data_ptr(), sy, sc, bool(causal), shape[-2] if causal else 1,
        )
        # fmt: on
    return deliver(y, out)


def _along(x: GPUArray, ax: int, inner: int, sc: float, out: GPUArray | None) -> GPUArray:
    """softmax along a non-last axis of contiguous [outer, n, inner] data."""
    x = x.contiguous()
    shape = x._shape
    n = shape[ax]
    outer = x.size // (n * inner) if n else 0
    y = out if out is not None and out.is_contiguous() else None
    if y is None:
        from pygpukit.creation import empty

        y = empty(shape, x._dtype, x._device)
    elif y._dtype is not x._dtype:
        raise TypeError(f"softmax: out is {y._dtype.name} but the result is {x._dtype.name}")
    if x.size:
        # fmt: off
        extension().softmax_cols(
            x._device.index, stream_of(x), x._dtype.name, outer, n, inner,
            x.data_ptr(), y.data_ptr(), sc,
        )
        # fmt: on
    return deliver(y, out)
