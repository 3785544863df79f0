"""Spectral projection: ``phase_project(z, magnitude, prev=None, *, prev_scale=0.0, eps=...)``.

    est = z - prev_scale * prev          (est = z without prev)
    y   = est * (magnitude / (|est| + eps))

The value of magnitude ``magnitude`` with est's phase: Griffin-Lim's projection onto the target
magnitudes, with the "fast Griffin-Lim" momentum step (Perraudin et al. 2013) folded in through
``prev`` (the previous iteration's rebuilt spectrum) and ``prev_scale`` = momentum / (1 +
momentum), in librosa.griffinlim's order of operations. |est| is sqrt(re^2 + im^2); eps keeps
zero bins finite (est = 0 gives 0).

- z, prev: complex64 or complex128, one shape; magnitude: the matching real dtype (float32 /
  float64), the same shape. The result has z's dtype.
- prev_scale, eps: finite floats, eps >= 0.
- ``out``: an optional buffer of z's shape and dtype.

Routing (pygpukit/routing/table.py): one Triton kernel (a single pass over the three arrays, where
the element-wise ops took ten), NumPy on the CPU (the reference, in float64).
"""

from __future__ import annotations

import math
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import complex128, float32, float64
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["phase_project"]


def _finite(op: str, name: str, v: Any, lo: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a float, got {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f) or (lo is not None and f < lo):
        bound = "" if lo is None else f" and >= {lo}"
        raise ValueError(f"{op}: {name} must be finite{bound}, got {v!r}")
    return f


def phase_project(
    z: GPUArray,
    magnitude: GPUArray,
    prev: GPUArray | None = None,
    *,
    prev_scale: float = 0.0,
    eps: float = 1.1754943508222875e-38,
    out: GPUArray | None = None,
) -> GPUArray:
    """est * (magnitude / (|est| + eps)) with est = z - prev_scale * prev (see the module
    docstring); eps defaults to float32's smallest normal, librosa's for float32."""
    op = "phase_project"
    chk.array(op, "z", z)
    if not z.dtype.is_complex:
        raise TypeError(f"{op}: z must be complex64 or complex128, got {chk.desc(z)}")
    real = float64 if z.dtype is complex128 else float32
    chk.array(op, "magnitude", magnitude)
    if magnitude.dtype is not real or magnitude.shape != z.shape:
        raise ValueError(
            f"{op}: magnitude must be {real.name} of z's shape {z.shape}, got {chk.desc(magnitude)}"
        )
    inputs: tuple[Any, ...] = (z, magnitude)
    if prev is not None:
        chk.array(op, "prev", prev)
        if prev.dtype is not z.dtype or prev.shape != z.shape:
            raise ValueError(
                f"{op}: prev must be {z.dtype.name} of z's shape {z.shape}, got {chk.desc(prev)}"
            )
        inputs = (z, magnitude, prev)
    c = _finite(op, "prev_scale", prev_scale)
    e = _finite(op, "eps", eps, 0.0)
    chk.out_arg(op, out, z.shape, z.dtype)
    return run(op, inputs, {"prev_scale": c, "eps": e}, out=out)  # type: ignore[no-any-return]
