"""Array factories. Memory always comes from the current context's pool on the current stream."""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import _convert, _layout, _memory, runtime
from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, as_dtype, bool_, float32, int64
from pygpukit.errors import ArrayTooLargeError, ConversionError

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
_MAX_BYTES = 2**63 - 1  # the pool takes a signed 64-bit size
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
    if nbytes > _MAX_BYTES:
        raise ArrayTooLargeError(
            f"shape {shp} of dtype {dt.name} needs {nbytes} bytes, more than any allocation "
            f"({_MAX_BYTES} bytes)"
        )
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
    raise ConversionError(
        f"full: fill value must be a bool, int or float, got {type(value).__name__} {value!r}"
    )


def full(shape: Any, fill_value: Any, dtype: Any = None, device: Any = None) -> GPUArray:
    """An array of ``fill_value``; a value the dtype cannot hold exactly (300 in uint8, NaN in
    int32, None) raises gp.ConversionError before anything is allocated."""
    dt = _scalar_dtype(fill_value) if dtype is None else as_dtype(dtype)
    _convert.scalar(fill_value, dt, "full")
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
    return from_numpy(_convert.array(host, dt, "arange"), device=device, dtype=dt)


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
    (bfloat16, float8_*, int4) map to the matching pygpukit dtypes. A conversion to ``dtype``
    that would change a value (out of range, NaN into integers) raises gp.ConversionError.
    """
    if not isinstance(array, np.ndarray):
        if isinstance(array, GPUArray):
            raise TypeError("from_numpy expects a numpy.ndarray, got a GPUArray (use .copy())")
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    if dtype is not None:
        dt = as_dtype(dtype)
        host = array if array.dtype == dt.np_dtype else _convert.array(array, dt, "from_numpy")
    else:
        try:
            dt = as_dtype(array.dtype)
        except TypeError:
            raise TypeError(
                f"from_numpy: NumPy dtype {array.dtype} has no pygpukit equivalent"
            ) from None
        host = array
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
        host = np.asarray(obj) if not _has_none(obj) else np.asarray(obj, dtype=object)
        if host.dtype.kind == "O" or dtype is not None:  # checked here to name asarray
            host = _convert.array(host, as_dtype(float32 if dtype is None else dtype), "asarray")
        return from_numpy(host, device=device, dtype=dtype)
    if dtype is not None and as_dtype(dtype) is not out.dtype:
        out = out.astype(dtype)
    if device is not None:
        out = out.to(device)
    return out


def _has_none(obj: Any) -> bool:
    """Whether a (nested) list or tuple holds None: NumPy would make it NaN in a float array."""
    if obj is None:
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_none(v) for v in obj)
    return False
