"""Backend selection for ops.

Every op validates its arguments and then calls ``run(op_name, inputs, params, out=out)``. ``run``
picks the backend for the inputs' device and returns GPUArray(s) on that device.

This is the seed of the routing table: the NumPy backend serves the CPU device. CUDA arrays have
no backend until the Triton and native backends are registered, and then nothing falls back
silently: a call that no backend can serve raises BackendUnavailableError naming the op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import _memory
from pygpukit.array import GPUArray
from pygpukit.errors import BackendUnavailableError
from pygpukit.runtime import Device

__all__ = ["run", "device_of"]


def device_of(op: str, inputs: tuple[Any, ...]) -> Device:
    """The one device all GPUArray inputs live on (ValueError naming the op otherwise)."""
    dev: Device | None = None
    for a in inputs:
        if isinstance(a, GPUArray):
            if dev is None:
                dev = a.device
            elif a.device is not dev:
                raise ValueError(f"{op}: inputs are on different devices ({dev} and {a.device})")
    if dev is None:
        raise TypeError(f"{op}: needs at least one GPUArray input")
    return dev


def _to_host(a: Any) -> Any:
    if isinstance(a, GPUArray):
        return a.to_numpy() if a.dtype.is_packed else _memory.host_view(a)
    return a


def _wrap(res: Any, dev: Device, out: GPUArray | None) -> GPUArray:
    from pygpukit.creation import from_numpy

    res = np.asarray(res)
    if out is not None:
        if out.shape != res.shape:
            raise ValueError(f"out has shape {out.shape}, the result has shape {res.shape}")
        if out.dtype.is_packed:
            _memory.upload(out, res)
        else:
            np.copyto(_memory.host_view(out), res, casting="unsafe")
        return out
    return from_numpy(res, device=dev)


def run(
    op: str,
    inputs: tuple[Any, ...],
    params: dict[str, Any] | None = None,
    out: GPUArray | None = None,
) -> Any:
    """Run ``op`` on the backend of the inputs' device; returns GPUArray or a tuple of them."""
    dev = device_of(op, inputs)
    if out is not None and out.device is not dev:
        raise ValueError(f"{op}: out is on {out.device} but the inputs are on {dev}")
    if dev.type != "cpu":
        raise BackendUnavailableError(
            f"{op}: no backend serves {dev} arrays in this build (the Triton and native GPU "
            "backends are not registered yet); move the data with .cpu() to use the NumPy backend"
        )
    from pygpukit.backends import cpu

    fn = getattr(cpu, op, None)
    if fn is None:
        raise BackendUnavailableError(f"{op}: the NumPy backend has no implementation")
    res = fn(*(_to_host(a) for a in inputs), **(params or {}))
    if isinstance(res, tuple):
        if out is not None:
            raise ValueError(f"{op}: out= is not supported for ops with several results")
        return tuple(_wrap(r, dev, None) for r in res)
    return _wrap(res, dev, out)
