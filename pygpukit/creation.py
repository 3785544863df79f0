"""Array factories. Memory always comes from the current context's pool on the current stream."""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import _layout, _memory, runtime
from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, as_dtype, bool_, float32, int64

__all__ = [
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "from_numpy",
    "asarray",
]

_make = GPUArray._make
_contig = _layout.contiguous_strides


def empty(shape: Any, dtype: Any = float32, device: Any = None) -> GPUArray:
    """An uninitialised contiguous array (the allocation is stream-ordered; nothing syncs)."""
    dt = dtype if isinstance(dtype, DataType) else as_dtype(dtype)
    shp = _layout.as_shape(shape)
    if type(device) is runtime.Device:  # hot path: a Device (from an array) needs no parsing
        dev = device
    else:
        dev = runtime.default_device() if device is None else runtime.device(device)
    n = _layout.numel(shp)
    if dt.is_packed:
        if shp and shp[-1] % 2:
            raise ValueError(f"packed int4 needs an even last dimension, got shape {shp}")
        nbytes = n // 2
    else:
        nbytes = n * dt.itemsize
    pool, stream, _ = runtime.alloc_target(dev)
    buf = pool.allocate(nbytes, stream)
    return _make(buf, buf.ptr, shp, _contig(shp), 0, dt, dev)


def zeros(shape: Any, dtype: Any = float32, device: Any = None) -> GPUArray:
    out = empty(shape, dtype, device)
    _memory.fill(out, 0)
    return out


def ones(shape: Any, dtype: Any = float32, device: Any = None) -> GPUArray:
    out = empty(shape, dtype, device)
    _memory.fill(out, 1)
    return out


def _scalar_dtype(value: Any) -> DataType:
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return float32
    raise TypeError(f"fill value must be a bool, int or float, got {type(value).__name__}")


def full(shape: Any, fill_value: Any, dtype: Any = None, device: Any = None) -> GPUArray:
    dt = _scalar_dtype(fill_value) if dtype is None else as_dtype(dtype)
    out = empty(shape, dt, device)
    _memory.fill(out, fill_value)
    return out


def arange(
    start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, device: Any = None
) -> GPUArray:
    """Like numpy.arange; int64 for integer arguments, float32 otherwise."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    ints = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    dt = (int64 if ints else float32) if dtype is None else as_dtype(dtype)
    host = np.arange(start, stop, step, dtype=np.float64 if not ints else np.int64)
    return from_numpy(host.astype(dt.np_dtype), device=device)


def empty_like(a: GPUArray, dtype: Any = None, device: Any = None) -> GPUArray:
    return empty(
        a.shape, a.dtype if dtype is None else dtype, a.device if device is None else device
    )


def zeros_like(a: GPUArray, dtype: Any = None, device: Any = None) -> GPUArray:
    return zeros(
        a.shape, a.dtype if dtype is None else dtype, a.device if device is None else device
    )


def ones_like(a: GPUArray, dtype: Any = None, device: Any = None) -> GPUArray:
    return ones(
        a.shape, a.dtype if dtype is None else dtype, a.device if device is None else device
    )


def full_like(a: GPUArray, fill_value: Any, dtype: Any = None, device: Any = None) -> GPUArray:
    return full(
        a.shape,
        fill_value,
        a.dtype if dtype is None else dtype,
        a.device if device is None else device,
    )


def from_numpy(array: Any, device: Any = None, dtype: Any = None) -> GPUArray:
    """Copy a NumPy array (any layout) to a new contiguous array on ``device``.

    The dtype is kept (``float64`` stays ``float64``) unless ``dtype`` is given. ml_dtypes arrays
    (bfloat16, float8_*, int4) map to the matching pygpukit dtypes.
    """
    if not isinstance(array, np.ndarray):
        if isinstance(array, GPUArray):
            raise TypeError("from_numpy expects a numpy.ndarray, got a GPUArray (use .copy())")
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    try:
        src_dt = as_dtype(array.dtype)
    except TypeError:
        raise TypeError(
            f"from_numpy: NumPy dtype {array.dtype} has no pygpukit equivalent"
        ) from None
    dt = src_dt if dtype is None else as_dtype(dtype)
    host = array if dt is src_dt else array.astype(dt.np_dtype)
    out = empty(host.shape, dt, device)
    _memory.upload(out, host)
    return out


def asarray(obj: Any, dtype: Any = None, device: Any = None) -> GPUArray:
    """A GPUArray from ``obj``, without a copy where possible.

    GPUArray -> itself (converted only if dtype/device differ); objects with ``__dlpack__`` (torch,
    CuPy, JAX) or ``__cuda_array_interface__`` -> zero-copy views; anything else goes through
    ``numpy.asarray`` and is copied to ``device``.
    """
    from pygpukit import interop

    if isinstance(obj, GPUArray):
        out = obj
    elif hasattr(obj, "__dlpack__") and not isinstance(obj, (np.ndarray, np.generic)):
        out = interop.from_dlpack(obj)
    elif hasattr(obj, "__cuda_array_interface__"):
        out = interop.from_cuda_array_interface(obj)
    else:
        host = np.asarray(obj)
        return from_numpy(host, device=device, dtype=dtype)
    if dtype is not None and as_dtype(dtype) is not out.dtype:
        out = out.astype(dtype)
    if device is not None:
        out = out.to(device)
    return out
