"""copy (any layout -> any layout of the same shape) and cast (any dtype pair) on the native
backend: the twins of triton_kernels/copy.py, same signatures (native/src/copy).

copy moves raw bits (bit-exact, NaN payloads included) and serves contiguous() and setitem on
the GPU when routed here, so it never copies its own input first: any input layout (broadcast
stride-0 views included) and any out= layout are read and written in place. cast converts with
the NumPy backend's rules (NumPy + ml_dtypes astype: round to nearest even, float -> fp8
overflow to NaN (e4m3fn) / inf (e5m2), float64 -> bfloat16/fp8 through float32, float -> integer
as x86's cvtt, see native/include/pygpukit_native/numeric.cuh), every pair among float64/32/16,
bfloat16, float8_e4m3fn/e5m2, int64/32/16/8, uint8 and bool.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import as_dt
from pygpukit.backends.native._libs import extension
from pygpukit.backends.native._map import launch
from pygpukit.creation import empty

__all__ = ["cast", "contiguous", "copy"]


def _no_packed(x: GPUArray, dt: Any) -> None:
    if x._dtype.is_packed or dt.is_packed:
        raise TypeError(
            f"native copy/cast: int4 is a packed storage type (x is {x._dtype.name}, target "
            f"{dt.name}); use x.astype(...), which converts through the host"
        )


def copy(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """A copy of x (any strides, broadcast views included) into out (any layout of x's shape,
    same dtype) or a new contiguous array. Bit-exact."""
    _no_packed(x, x._dtype)
    if out is not None and (out._dtype is not x._dtype or out._shape != x._shape):
        raise ValueError(
            f"copy: out has shape {out._shape} and dtype {out._dtype.name}, x has shape "
            f"{x._shape} and dtype {x._dtype.name}"
        )
    res = out if out is not None else empty(x._shape, x._dtype, x._device)
    return launch(extension().copy, "copy", x._dtype.name, res, (x,))


def contiguous(x: GPUArray) -> GPUArray:
    """x itself when C-contiguous, else a contiguous copy made on the device."""
    return x if x.is_contiguous() else copy(x)


def cast(x: GPUArray, *, dtype: object, out: GPUArray | None = None) -> GPUArray:
    """x converted to ``dtype`` (the NumPy backend's values, see the module docstring)."""
    dt = as_dt(dtype)
    _no_packed(x, dt)
    res = out if out is not None else empty(x._shape, dt, x._device)
    op = "copy" if dt is x._dtype else "cast"
    return launch(extension().copy, op, x._dtype.name, res, (x,))
