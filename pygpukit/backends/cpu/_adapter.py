"""The NumPy backend in the routed calling convention: GPUArray inputs on the CPU device are read
as zero-copy NumPy views, the NumPy function runs, and its result becomes a GPUArray (or is
copied into ``out``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pygpukit import _memory
from pygpukit.array import GPUArray

__all__ = ["adapt"]


def adapt(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (NumPy arrays in, NumPy arrays out) as a routed implementation."""

    def call(*inputs: Any, out: GPUArray | None = None, **params: Any) -> Any:
        dev = next(a.device for a in inputs if isinstance(a, GPUArray))
        res = fn(*(_host(a) for a in inputs), **params)
        if res is None:  # an in-place op (kv_cache_write) wrote through the host views
            return None
        if isinstance(res, tuple):
            return tuple(_wrap(r, dev, None) for r in res)
        return _wrap(res, dev, out)

    call.__name__ = fn.__name__
    return call


def _host(a: Any) -> Any:
    if isinstance(a, GPUArray):
        return a.to_numpy() if a.dtype.is_packed else _memory.host_view(a)
    return a


def _wrap(res: Any, dev: Any, out: GPUArray | None) -> GPUArray:
    from pygpukit.creation import from_numpy

    res = np.asarray(res)
    if out is not None:
        if out.dtype.is_packed:
            _memory.upload(out, res)
        else:
            np.copyto(_memory.host_view(out), res, casting="unsafe")
        return out
    return from_numpy(res, device=dev)
