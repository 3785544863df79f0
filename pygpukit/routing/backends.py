"""The one lookup rule from a routing-table candidate to a function, over the backend records.

Each backend home under pygpukit/backends/ declares a ``Backend`` record (its ``__init__.py``,
contract in pygpukit/backends/_record.py):

- ``triton``: pygpukit/backends/triton_kernels/ (or the user's edited copy of a family from
  ``PYGPUKIT_TRITON_KERNELS`` / ``load_kernels``);
- ``native``: pygpukit/backends/native/ (cuBLASLt through the Rust core, the C++ extension's
  CUDA kernels);
- ``cpu``: pygpukit/backends/cpu/ (NumPy).

``implementation(backend, family, op)`` is the same for all three: the record's module for the
family, the function named ``op`` in it, the record's family status, the record's adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pygpukit.backends import records as _records
from pygpukit.backends._record import Backend
from pygpukit.backends.triton_kernels import interpreting, kernel_dir, set_kernel_dir

__all__ = [
    "availability",
    "implementation",
    "interpreting",
    "kernel_dir",
    "record",
    "set_kernel_dir",
]

_lock = threading.Lock()
_avail: dict[str, tuple[bool, str]] = {}


def record(backend: str) -> Backend | None:
    """The record of a backend name, or None for a name no home declares."""
    return _records().get(backend)


def availability(backend: str) -> tuple[bool, str]:
    """(available, reason when not) for a backend; computed once per process."""
    got = _avail.get(backend)
    if got is None:
        rec = record(backend)
        if rec is None:
            return False, f"unknown backend {backend!r}"
        with _lock:
            got = _avail.get(backend) or rec.probe()
            _avail[backend] = got
    return got


def implementation(backend: str, family: str, op: str) -> tuple[Callable[..., Any] | None, str]:
    """(callable, "") or (None, why not) for ``op`` of ``family`` on ``backend``."""
    rec = record(backend)
    if rec is None:
        return None, f"unknown backend {backend!r}"
    mod = rec.module(family)
    fn = getattr(mod, op, None) if mod is not None else None
    if fn is None:
        return None, f"{rec.package}.{family} has no kernel for {op}"
    ok, why = rec.family_status(family)
    if not ok:
        return None, why
    return (rec.adapt(fn) if rec.adapt is not None else fn), ""
