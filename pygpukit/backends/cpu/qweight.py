"""Weights quantized for the decode GEMV formats (gp.quantize_weight's routed ops; the
reference quantizers themselves are in gemv.py, beside the products they feed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from pygpukit.dtypes import as_dtype

from ._common import Array
from .gemv import quantize_fp8_weight, quantize_int4_weight, quantize_nvfp4_weight

__all__ = ["quantize_weight", "weight_amax"]


def weight_amax(w: Array) -> Array:
    """max |w[n, :]| per row as float64 [N] (NaN where a row holds one)."""
    a: Array = np.abs(np.asarray(w).astype(np.float64)).max(axis=1, initial=0.0)
    return a


def quantize_weight(
    w: Array, amax: Array, *, format: str, block: int, scale_dtype: str, global_scale: float
) -> tuple[Array, Array]:
    """(data, scales) of W [N, K] in ``format`` (pygpukit.qweight.quantize_weight); amax (from
    weight_amax) is not needed here, the reference recomputes what it uses."""
    del amax
    w64 = np.asarray(w).astype(np.float64)
    if format in ("fp8", "w8a8"):
        return quantize_fp8_weight(w64, block)
    if format == "int4":
        vals, scales = quantize_int4_weight(w64, block, as_dtype(scale_dtype).np_dtype)
        return vals.astype(ml_dtypes.int4), scales
    packed, scales, _ = quantize_nvfp4_weight(w64, global_scale)
    return packed, scales
