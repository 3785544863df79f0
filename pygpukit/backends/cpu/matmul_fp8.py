"""FP8 scaled matrix product (NumPy reference).

matmul_fp8: (scale_a . a) @ (scale_b . b)^T (+ bias) with a [M, K] and b [N, K] (weights
stored [out_features, in_features]), scales as in quant.py (one per (br, bc) group), the
dequantized operands and the product in float64, rounded once to the result dtype.
``fast_accum`` only loosens the GPU's accumulation; the reference is the exact product either
way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import Array, DTypeLike, finish
from .quant import expand_scale

__all__ = ["matmul_fp8"]


def matmul_fp8(
    a: Array,
    b: Array,
    scale_a: Array,
    scale_b: Array,
    bias: Array | None = None,
    *,
    out_dtype: DTypeLike,
    groups: tuple[tuple[int, int], tuple[int, int]],
    fast_accum: bool = False,
) -> Array:
    """(scale_a . a) @ (scale_b . b)^T (+ bias) in float64, rounded once to ``out_dtype``."""
    del fast_accum  # the reference is exact
    a, b = np.asarray(a), np.asarray(b)
    m, k = a.shape
    n = b.shape[0]
    sa = expand_scale(np.asarray(scale_a, np.float64), m, k, groups[0])
    sb = expand_scale(np.asarray(scale_b, np.float64), n, k, groups[1])
    with np.errstate(all="ignore"):
        y: Any = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb).T
        if bias is not None:
            y = y + np.asarray(bias).astype(np.float64)
        return finish(y, out_dtype)
