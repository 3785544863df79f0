"""phase_project in NumPy: the reference of pygpukit/ops/spectral.py, in float64 (complex128),
rounded once to z's dtype."""

from __future__ import annotations

import numpy as np

from ._common import Array

__all__ = ["phase_project"]


def phase_project(
    z: Array, magnitude: Array, prev: Array | None = None, *, prev_scale: float, eps: float
) -> Array:
    """est * (magnitude / (|est| + eps)), est = z - prev_scale * prev."""
    est = np.asarray(z).astype(np.complex128)
    if prev is not None:
        est = est - prev_scale * np.asarray(prev).astype(np.complex128)
    norm = np.sqrt(est.real**2 + est.imag**2) + eps
    y = est * (np.asarray(magnitude).astype(np.float64) / norm)
    return y.astype(np.asarray(z).dtype)  # type: ignore[no-any-return]
