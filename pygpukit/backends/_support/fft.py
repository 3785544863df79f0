"""Plumbing shared by the FFT kernels of both GPU homes (triton_kernels/fft*.py, native/fft.py):
np.pad's mode numbers, the fp32 view of an operand, the norm's scale and the upload of a plan's
constant tables.

Tables (DFT matrices, twiddles, chirps) are cached per length and device. Uploading one is a
copy the next kernel may read from any stream, so ``device_f32`` waits for it, once per table,
never in the steady state; and a CUDA graph capture cannot record it, so the first call of a
length under capture is refused with what to do instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pygpukit import graphs, runtime
from pygpukit._complex import view_as_real
from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy
from pygpukit.errors import CaptureError

__all__ = [
    "PAD_CONSTANT",
    "PAD_EDGE",
    "PAD_MODES",
    "PAD_REFLECT",
    "PAD_SYMMETRIC",
    "device_f32",
    "interleaved",
    "norm_scale",
    "operand",
    "uploaded",
]

# np.pad's modes as the kernels number them (0 is "no padding" where a kernel takes it).
PAD_CONSTANT, PAD_REFLECT, PAD_SYMMETRIC, PAD_EDGE = 1, 2, 3, 4
PAD_MODES = {"constant": PAD_CONSTANT, "reflect": PAD_REFLECT, "symmetric": PAD_SYMMETRIC,
             "edge": PAD_EDGE}  # fmt: skip


def operand(a: GPUArray) -> tuple[GPUArray, tuple[int, ...], int]:
    """The fp32-unit view of a real or complex array, its lead strides and element stride."""
    if a.dtype.is_complex:
        f = view_as_real(a)
        return f, f.element_strides[:-2], f.element_strides[-2]
    return a, a.element_strides[:-1], a.element_strides[-1]


def norm_scale(n: int, norm: str, inverse: bool) -> float:
    """The factor numpy.fft's ``norm`` applies to an n-point transform in this direction."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def interleaved(z: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
    """Complex values as (re, im) pairs of ``dtype`` (float32) along a new last axis."""
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def uploaded(dev: Any) -> None:
    """Wait for a new plan's table uploads: the tables are cached and later read by kernels on
    any stream, which must not race the copy (once per plan, never in the steady state)."""
    if dev.type == "cuda":
        runtime.current_stream(dev).synchronize()


def device_f32(a: np.ndarray, dev: Any, dtype: Any = np.float32) -> GPUArray:
    """One table on the device (as ``dtype``, float32 unless asked), its copy finished before it
    can enter a cache (a kernel on another stream may read it next). Refused under a CUDA graph
    capture (module docstring)."""
    if dev.type == "cuda" and graphs.is_capturing(dev):
        raise CaptureError(
            "fft: the first call of a transform length uploads its plan tables, which cannot "
            "happen inside a CUDA graph capture; run the same FFT once before capturing"
        )
    t = from_numpy(np.ascontiguousarray(a, dtype=dtype), device=dev)
    uploaded(dev)
    return t
