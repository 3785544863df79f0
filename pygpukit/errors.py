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

Bad input says what is wrong and changes nothing (see README, "Bad input"):
ConversionError (a value that has no exact place in the target dtype), ReadOnlyError and
OverlapError (a write target that must not be written), ArrayTooLargeError (a shape whose byte
count exceeds any allocation) and NvrtcUnavailableError (gp.jit without NVRTC). Each subclasses
the builtin exceptions earlier versions raised in its place, so old ``except`` clauses still work.
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
    "ConversionError",
    "ReadOnlyError",
    "OverlapError",
    "ArrayTooLargeError",
    "NvrtcUnavailableError",
]


class BackendUnavailableError(RuntimeError):
    """No backend can run this op for these arguments on this device (nothing falls back)."""


class RouteError(ValueError):
    """A route override names an unknown op or backend, or a forced backend cannot serve."""


class ConversionError(ValueError, TypeError):
    """A value cannot be stored in the target dtype without changing it: an integer out of the
    dtype's range, NaN, inf or None into an integer array, None into a float array, a finite
    number past a float dtype's largest value. The message names the value, where it sits and the
    dtype. Both a ValueError (NumPy's type for bad values) and a TypeError (for None and other
    non-numbers), so either old ``except`` catches it; the target is left unchanged."""


class ReadOnlyError(ValueError):
    """A write (setitem, out=, an in-place op, fill, a copy into it) to an array imported from a
    read-only producer (DLPack's read-only flag, a read-only __cuda_array_interface__): writing
    would change memory its owner declared immutable. Copy it first (``x.copy()``)."""


class OverlapError(ValueError):
    """A write target whose elements share memory, e.g. a broadcast view (stride 0): several
    results would race for one location and the source array would change. NumPy makes such
    views read-only; write to the source array or to a ``copy()`` instead."""


class ArrayTooLargeError(ValueError, OverflowError):
    """A shape whose element count times the item size does not fit any allocation (more than
    2**63 - 1 bytes). Also an OverflowError, the type such shapes raised before."""


class NvrtcUnavailableError(RuntimeError):
    """``gp.jit`` needs NVRTC and none could be loaded (PYGPUKIT_NVRTC_PATH, the nvidia-* wheels,
    the system CUDA); the message says where it looked. ``gp.is_nvrtc_available()`` asks first."""
