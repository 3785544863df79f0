"""Helpers for op tests through the public API: uploads, non-contiguous views, poisoned outs.

The tests run on DEVICE: "cpu" (the NumPy backend) unless PYGPUKIT_TEST_DEVICE names another,
e.g. PYGPUKIT_TEST_DEVICE=cuda:0 runs the same tests through the GPU routes (.ci/gpu/check.sh
does, with the default routes and with PYGPUKIT_ROUTE='*:native'). Every helper also takes an
explicit device, which the Triton kernel tests pass (tests/triton_kernels/_tkutil.py re-exports
these helpers).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import pygpukit as gp

LAYOUTS = ("contiguous", "strided", "transposed")
DEVICE = os.environ.get("PYGPUKIT_TEST_DEVICE", "cpu")


def up(x: Any, device: str | None = None) -> gp.GPUArray:
    """A contiguous GPUArray on ``device`` (default: the test device) holding x."""
    return gp.from_numpy(np.ascontiguousarray(x), device=DEVICE if device is None else device)


def view(x: np.ndarray, layout: str, device: str | None = None) -> gp.GPUArray:
    """A GPUArray on ``device`` (default: the test device) with x's values in the given layout.

    strided: every other element of a twice-as-wide buffer along the last axis (x[..., ::2]);
    transposed: the last two axes swapped in memory and swapped back as a view (1-D: strided).
    A 0-d x has no layout to vary: it is uploaded as is.
    """
    if layout == "contiguous" or x.ndim == 0:
        return up(x, device)
    if layout == "transposed" and x.ndim >= 2:
        v = up(np.swapaxes(x, -1, -2), device).swapaxes(-1, -2)
        assert not v.is_contiguous() or min(x.shape[-2:]) == 1
        return v
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    wide[..., ::2] = x
    return up(wide, device)[..., ::2]


def poisoned(shape: tuple[int, ...], dtype: Any, device: str | None = None) -> gp.GPUArray:
    """An out= buffer on ``device`` (default: the test device) full of NaN (floats; NaN + NaN j
    for complex), True (bool) or the dtype's minimum (integers), so any element the op fails to
    write shows up in the comparison."""
    dt = gp.as_dtype(dtype)
    dev = DEVICE if device is None else device
    if dt.is_complex:  # both parts NaN, so an unwritten real or imaginary part shows
        return gp.full(shape, complex(float("nan"), float("nan")), dtype=dt, device=dev)
    if dt.is_floating:
        return gp.full(shape, float("nan"), dtype=dt, device=dev)
    if dt.kind == "b":
        return gp.full(shape, True, dtype=dt, device=dev)
    return gp.full(shape, int(np.iinfo(dt.np_dtype).min), dtype=dt, device=dev)
