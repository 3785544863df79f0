"""Argument checks shared by the audio functions.

Every public function validates all of its arguments before the first op runs, and its errors
name the function and the argument (TypeError for a wrong type or dtype, ValueError for a wrong
value or shape), as the op layer does (pygpukit/ops/_checks.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy
from pygpukit.dtypes import float32, float64
from pygpukit.ops import _checks as ops_chk

# The FFT ops serve float32 (-> complex64) and float64 (-> complex128); half types would need
# a silent widening, which the project does not do.
_SIGNAL_DTYPES = (float32, float64)


def signal(fn: str, name: str, y: Any, min_ndim: int = 1) -> GPUArray:
    """y as a float32/float64 GPUArray of at least ``min_ndim`` dims; a NumPy array is uploaded
    to the default device (librosa's inputs are NumPy arrays)."""
    if isinstance(y, np.ndarray):
        if y.dtype not in (np.float32, np.float64):
            raise TypeError(
                f"{fn}: {name} must be a float32 or float64 array, got NumPy dtype {y.dtype}"
                + _cast_hint(y.dtype.kind)
            )
        y = from_numpy(np.ascontiguousarray(y))
    if not isinstance(y, GPUArray):
        raise TypeError(f"{fn}: {name} must be a GPUArray or a NumPy array, got {type(y).__name__}")
    if y.dtype not in _SIGNAL_DTYPES:
        raise TypeError(
            f"{fn}: {name} must be a float32 or float64 array, got dtype {y.dtype.name}"
            + _cast_hint(y.dtype.kind)
        )
    if y.ndim < min_ndim:
        raise ValueError(
            f"{fn}: {name} must have at least {min_ndim} dim(s) ([..., samples]), "
            f"got shape {y.shape}"
        )
    return y


def complex_array(fn: str, name: str, z: Any, min_ndim: int = 2) -> GPUArray:
    """z as a complex64/complex128 GPUArray of at least ``min_ndim`` dims (NumPy is uploaded)."""
    if isinstance(z, np.ndarray):
        if z.dtype not in (np.complex64, np.complex128):
            raise TypeError(
                f"{fn}: {name} must be a complex64 or complex128 array, got NumPy dtype {z.dtype}"
            )
        z = from_numpy(np.ascontiguousarray(z))
    if not isinstance(z, GPUArray):
        raise TypeError(f"{fn}: {name} must be a GPUArray or a NumPy array, got {type(z).__name__}")
    if z.dtype.name not in ("complex64", "complex128"):
        raise TypeError(
            f"{fn}: {name} must be a complex64 or complex128 array, got dtype {z.dtype.name}"
        )
    if z.ndim < min_ndim:
        raise ValueError(
            f"{fn}: {name} must have at least {min_ndim} dims ([..., freq, frames]), "
            f"got shape {z.shape}"
        )
    return z


def _cast_hint(kind: str) -> str:
    if kind in ("i", "u", "b"):
        return "; integer PCM must be scaled to [-1, 1) floats first (e.g. y / 32768.0)"
    return "; cast it first, e.g. y.astype(gp.float32)"


def positive_int(fn: str, name: str, value: Any, allow_none: bool = False) -> int | None:
    """value as an int > 0 (None passes when allowed)."""
    if value is None and allow_none:
        return None
    v = ops_chk.as_int(fn, name, value)
    if v <= 0:
        raise ValueError(f"{fn}: {name} must be > 0, got {v}")
    return v


def non_negative_int(fn: str, name: str, value: Any) -> int:
    v = ops_chk.as_int(fn, name, value)
    if v < 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {v}")
    return v


def number(
    fn: str, name: str, value: Any, *, positive: bool = False, allow_none: bool = False
) -> Any:
    """value as a Python float (None passes when allowed); positive=True requires > 0."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or (positive and v <= 0):
        need = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{fn}: {name} must be {need}, got {value!r}")
    return v


def choice(fn: str, name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if not isinstance(value, (str, type(None))) or value not in allowed:
        raise ValueError(f"{fn}: {name} must be one of {allowed}, got {value!r}")
