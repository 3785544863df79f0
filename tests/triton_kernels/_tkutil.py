"""Helpers of the Triton kernel tests: uploads, non-contiguous views, poisoned out= buffers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pygpukit as gp

GPU = pytest.mark.gpu
# fp32 everywhere (the interpreter included); half types and float64 on the GPU only.
FLOATS = ["float32", pytest.param("float16", marks=GPU), pytest.param("bfloat16", marks=GPU)]
FLOATS64 = [*FLOATS, pytest.param("float64", marks=GPU)]
LAYOUTS = ("contiguous", "strided", "transposed")


def up(x: Any, device: str) -> gp.GPUArray:
    """A contiguous array on ``device`` holding x."""
    return gp.from_numpy(np.ascontiguousarray(x), device=device)


def view(x: np.ndarray, layout: str, device: str) -> gp.GPUArray:
    """x's values in a layout: contiguous; strided (x[..., ::2] of a twice-as-wide buffer);
    transposed (the last two axes swapped in memory and swapped back as a view)."""
    if layout == "contiguous" or x.ndim == 0:
        return up(x, device)
    if layout == "transposed" and x.ndim >= 2:
        return up(np.swapaxes(x, -1, -2), device).swapaxes(-1, -2)
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    wide[..., ::2] = x
    return up(wide, device)[..., ::2]


def poisoned(shape: tuple[int, ...], dtype: Any, device: str) -> gp.GPUArray:
    """An out= buffer full of NaN (floats), True (bool) or the type's minimum (integers)."""
    dt = gp.as_dtype(dtype)
    if dt.is_floating:
        return gp.full(shape, float("nan"), dtype=dt, device=device)
    if dt.kind == "b":
        return gp.full(shape, True, dtype=dt, device=device)
    return gp.full(shape, int(np.iinfo(dt.np_dtype).min), dtype=dt, device=device)


def poisoned_strided(shape: tuple[int, ...], dtype: Any, device: str) -> gp.GPUArray:
    """A poisoned out= that is a non-contiguous view (every other element of the last dim)."""
    wide = poisoned((*shape[:-1], 2 * shape[-1]), dtype, device)
    return wide[..., ::2]


def host(a: gp.GPUArray) -> np.ndarray:
    return a.to_numpy()
