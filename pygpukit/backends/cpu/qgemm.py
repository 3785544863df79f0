"""The mixed-input GEMM ops (NumPy reference): qgemm_fp8, qgemm_int4 and qgemm_nvfp4 are the
decode GEMV ops of gemv.py under another name (float64 with the dequantized weight, rounded
once; the ops differ only in the kernel that serves them on the GPU, chosen by the row count in
pygpukit/ops/gemv.py); qgemm_int4_dense and qgemm_fp8_dense are the product with each weight
value rounded once to x's dtype first (the dense path's weight: dequantize_weight, then
linear); qgemm_w8a8 is matmul_fp8's product with per-row and per-channel scales;
dequantize_weight is an fp8 / int4 / nvfp4 weight in a float dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import Array
from .gemv import (
    _product,
    dequantize_fp8_weight,
    dequantize_int4_weight,
    dequantize_nvfp4_weight,
    round_to,
)
from .gemv import gemv_fp8 as qgemm_fp8
from .gemv import gemv_int4 as qgemm_int4
from .gemv import gemv_nvfp4 as qgemm_nvfp4

__all__ = [
    "dequantize_weight",
    "qgemm_fp8",
    "qgemm_fp8_dense",
    "qgemm_int4",
    "qgemm_int4_dense",
    "qgemm_nvfp4",
    "qgemm_w8a8",
]


def qgemm_int4_dense(
    x: Array, data: Array, scales: Array, bias: Array | None = None, *, group: int
) -> Array:
    """x @ round_x(scales * data)^T (+ bias): each weight value (int4 data [N, K] times its
    128-group scale) rounded once to x's dtype, then the float64 product rounded once. (The GPU
    kernels round code * scale to float32 first: one ulp of x's dtype apart in rare ties when
    the scales are float32.)"""
    x = np.asarray(x)
    w = round_to(dequantize_int4_weight(np.asarray(data), np.asarray(scales), group), x.dtype)
    return _product(x, np.asarray(w).astype(np.float64), bias)


def qgemm_fp8_dense(
    x: Array, data: Array, scales: Array, bias: Array | None = None, *, block: int
) -> Array:
    """x @ round_x(scales * data)^T (+ bias): each weight value (e4m3 data [N, K] times its
    per-channel (block 0) or 128-block scale) rounded once to x's dtype, then the float64
    product rounded once (the GPU kernels round code * scale to float32 first, as for
    qgemm_int4_dense)."""
    x = np.asarray(x)
    w = round_to(dequantize_fp8_weight(np.asarray(data), np.asarray(scales), block), x.dtype)
    return _product(x, np.asarray(w).astype(np.float64), bias)


def qgemm_w8a8(
    q: Array,
    row_scales: Array,
    data: Array,
    scales: Array,
    bias: Array | None = None,
    *,
    out_dtype: Any,
) -> Array:
    """(row_scales . q) @ (scales . data)^T (+ bias) in float64, rounded once to out_dtype."""
    a = np.asarray(q).astype(np.float64) * np.asarray(row_scales).astype(np.float64)
    w = dequantize_fp8_weight(np.asarray(data), np.asarray(scales), 0)
    y = a @ w.T
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float64)
    return round_to(y, out_dtype)


def dequantize_weight(
    data: Array, scales: Array, *, fmt: str, block: int, global_scale: float, out_dtype: Any
) -> Array:
    """The weight's values (code times scales, float64), rounded once to out_dtype."""
    if fmt == "fp8":
        w = dequantize_fp8_weight(np.asarray(data), np.asarray(scales), block)
    elif fmt == "int4":
        w = dequantize_int4_weight(np.asarray(data), np.asarray(scales), block)
    else:
        w = dequantize_nvfp4_weight(np.asarray(data), np.asarray(scales), global_scale)
    return round_to(w, out_dtype)
