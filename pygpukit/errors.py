"""Exceptions of pygpukit.

Runtime errors raised by the Rust core (CUDA failures, out-of-memory, quota, calls a CUDA graph
cannot record) are defined there and re-exported here, so ``except pygpukit.OutOfMemoryError``
catches what the pool raises.

AdmissionError(RuntimeError) is the scheduler's refusal of a context or task (pygpukit.scheduler):
its message and attributes (subject, reason, requested, unreserved, holders) give the numbers,
and nothing was admitted.

CaptureError(RuntimeError) means the call can never be recorded into a CUDA graph (a host copy, a
switch to another stream, a graph on the CPU device): retrying the same work inside a capture
fails the same way. Other errors raised inside a capture (nested captures, out of memory) are
about the moment, not the work. The driver's own capture errors stay CudaError (for example
CUDA_ERROR_STREAM_CAPTURE_INVALIDATED after another thread's device-wide synchronize, or the
pool's out-of-memory retry synchronizing during a capture): they can pass, so callers retry them.
"""

from __future__ import annotations

from pygpukit._core import (
    AdmissionError,
    CaptureError,
    CudaError,
    NoDeviceError,
    OutOfMemoryError,
    QuotaExceededError,
)

__all__ = [
    "AdmissionError",
    "CaptureError",
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
