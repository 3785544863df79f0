"""Magnitudes of complex GPUArrays through their float view.

Complex arrays are storage types (pygpukit/dtypes.py rule 7): arithmetic runs on
``gp.view_as_real(z)``, the ``[..., 2]`` (real, imaginary) pairs, with the routed float ops.
"""

from __future__ import annotations

from pygpukit import ops
from pygpukit.array import GPUArray, view_as_real


def abs2(z: GPUArray) -> GPUArray:
    """|z|**2 = re**2 + im**2 (one multiply and a pair sum; no square root to undo)."""
    ri = view_as_real(z)
    return ops.sum(ri * ri, axis=-1)


def magnitude(z: GPUArray) -> GPUArray:
    """|z| = sqrt(re**2 + im**2). NumPy's hypot guards against overflow past ~1.8e19 in float32;
    spectra of audio in [-1, 1] stay far below that, so the plain formula is kept."""
    return ops.sqrt(abs2(z))


def abs_pow(z: GPUArray, power: float) -> GPUArray:
    """|z|**power, from |z|**2 without a square root for the common power 2 (and 1)."""
    if power == 2.0:
        return abs2(z)
    if power == 1.0:
        return magnitude(z)
    return ops.pow(abs2(z), 0.5 * power)
