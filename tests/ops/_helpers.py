"""Helpers for op tests through the public API: uploads, non-contiguous views, poisoned outs.

The tests run on DEVICE: "cpu" (the NumPy backend) unless PYGPUKIT_TEST_DEVICE names another,
e.g. PYGPUKIT_TEST_DEVICE=cuda:0 runs the same tests through the GPU routes (scripts/gpu_check.sh
does, with the default routes and with PYGPUKIT_ROUTE='*:native').
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import pygpukit as gp

LAYOUTS = ("contiguous", "strided", "transposed")
DEVICE = os.environ.get("PYGPUKIT_TEST_DEVICE", "cpu")


def up(x: Any) -> gp.GPUArray:
    """A contiguous GPUArray on the test device holding x."""
    return gp.from_numpy(np.ascontiguousarray(x), device=DEVICE)


def view(x: np.ndarray, layout: str) -> gp.GPUArray:
    """A GPUArray with x's values in the given layout.

    strided: every other element of a twice-as-wide buffer along the last axis (x[..., ::2]);
    transposed: the last two axes swapped in memory and swapped back as a view (1-D: strided).
    """
    if layout == "contiguous":
        return up(x)
    if layout == "transposed" and x.ndim >= 2:
        v = up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
        assert not v.is_contiguous() or min(x.shape[-2:]) == 1
        return v
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]) if x.ndim else (2,), dtype=x.dtype)
    wide[..., ::2] = x
    v = up(wide)[..., ::2]
    return v


def poisoned(shape: tuple[int, ...], dtype: Any) -> gp.GPUArray:
    """An out= buffer full of NaN (floats) or the dtype's minimum (integers), so any element the
    op fails to write shows up in the comparison."""
    dt = gp.as_dtype(dtype)
    if dt.is_floating:
        return gp.full(shape, float("nan"), dtype=dt, device=DEVICE)
    if dt.kind == "b":
        return gp.full(shape, True, dtype=dt, device=DEVICE)
    return gp.full(shape, int(np.iinfo(dt.np_dtype).min), dtype=dt, device=DEVICE)
