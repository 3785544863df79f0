"""Exceptions of pygpukit.

Runtime errors raised by the Rust core (CUDA failures, out-of-memory, quota) are defined there and
re-exported here, so ``except pygpukit.OutOfMemoryError`` catches what the pool raises.
"""

from __future__ import annotations

from pygpukit._core import CudaError, NoDeviceError, OutOfMemoryError, QuotaExceededError

__all__ = [
    "CudaError",
    "NoDeviceError",
    "OutOfMemoryError",
    "QuotaExceededError",
    "BackendUnavailableError",
    "RouteError",
]


class BackendUnavailableError(RuntimeError):
    """No backend can run this op for these arguments on this device (nothing falls back)."""


class RouteError(ValueError):
    """A route override names an unknown op or backend, or a forced backend cannot serve."""
