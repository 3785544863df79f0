"""The STFT synthesis steps in NumPy, the references of pygpukit/ops/spectral.py: phase_project
in float64 (complex128), rounded once to z's dtype; overlap_add in the frames' dtype, each
sample's frames added in increasing order, the order the Triton kernel adds them in."""

from __future__ import annotations

import numpy as np

from ._common import Array

__all__ = ["overlap_add", "phase_project"]


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


def overlap_add(
    frames: Array,
    *extra: Array,
    hop: int,
    start: int,
    length: int,
    windowed: bool,
    enveloped: bool,
) -> Array:
    """sum_f frames[:, f] * window placed f hop apart, samples [start, start + length), times
    the envelope; extra: the window and / or the envelope, as the flags say."""
    x = np.asarray(frames)
    rest = list(extra)
    win = np.asarray(rest.pop(0)) if windowed else None
    env = np.asarray(rest.pop(0)) if enveloped else None
    b, nf, n = x.shape
    y = np.zeros((b, length), x.dtype)
    for f in range(nf):  # frame f covers output samples [f hop - start, f hop - start + n)
        lo = f * hop - start
        a, e = max(lo, 0), min(lo + n, length)
        if a < e:
            piece = x[:, f, a - lo : e - lo]
            y[:, a:e] += piece * win[a - lo : e - lo] if win is not None else piece
    if env is not None:
        y = y * env
    return y
