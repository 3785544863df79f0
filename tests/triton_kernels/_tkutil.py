"""Helpers of the Triton kernel tests: uploads, non-contiguous views, poisoned out= buffers.

up, view and poisoned are tests/ops/_helpers.py's (one source), called here with an explicit
device (the ``device`` fixture of conftest.py); LAYOUTS is its list too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ops._helpers import LAYOUTS, poisoned, up, view

import pygpukit as gp

__all__ = [
    "FLOATS",
    "FLOATS64",
    "GPU",
    "LAYOUTS",
    "host",
    "poisoned",
    "poisoned_strided",
    "up",
    "view",
]

GPU = pytest.mark.gpu
# fp32 everywhere (the interpreter included); half types and float64 on the GPU only.
FLOATS = ["float32", pytest.param("float16", marks=GPU), pytest.param("bfloat16", marks=GPU)]
FLOATS64 = [*FLOATS, pytest.param("float64", marks=GPU)]


def poisoned_strided(shape: tuple[int, ...], dtype: Any, device: str) -> gp.GPUArray:
    """A poisoned out= that is a non-contiguous view (every other element of the last dim)."""
    wide = poisoned((*shape[:-1], 2 * shape[-1]), dtype, device)
    return wide[..., ::2]


def host(a: gp.GPUArray) -> np.ndarray:
    return a.to_numpy()
