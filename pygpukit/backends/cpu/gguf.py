"""GGUF formats in NumPy: dequantization and the product with a quantized weight.

The weight arrives in planes (pygpukit/_gguf_planes.py), regrouped back into the file's blocks
here. The values are the ``gguf`` package's (gguf.quants.dequantize, which is llama.cpp's
dequantize_row_* bit for bit): float32 numbers, exact in float64. The product is the float64
product of x with those values, plus bias, rounded once to the result dtype (as the other
quantized products of this backend, backends/cpu/gemv.py), so the reference carries no
accumulation error of its own. The Triton kernels (backends/triton_kernels/gguf.py) give the
same dequantized bits and are measured against this product.
"""

from __future__ import annotations

import numpy as np

from ._common import Array
from .gemv import round_to

__all__ = ["dequantize_blocks", "dequantize_gguf", "linear_gguf", "moe_linear_gguf"]


def dequantize_blocks(data: Array, fmt: str) -> Array:
    """float32 [N, K] values of the plane rows ``data`` (uint8 [N, row bytes]) in ``fmt``."""
    import gguf

    from pygpukit._gguf_planes import BLOCKS, to_blocks

    raw = to_blocks(fmt, np.asarray(data, dtype=np.uint8))
    qk, bb = BLOCKS[fmt]
    if raw.shape[0] == 0:
        return np.zeros((0, raw.shape[1] // bb * qk), dtype=np.float32)
    qtype = gguf.GGMLQuantizationType[fmt.upper()]
    with np.errstate(all="ignore"):  # an inf/NaN scale gives inf/NaN values, as in ggml
        vals = gguf.quants.dequantize(raw, qtype)
    return np.asarray(vals, dtype=np.float32).reshape(raw.shape[0], -1)


def dequantize_gguf(data: Array, ids: Array | None, *, fmt: str, out_dtype: np.dtype) -> Array:
    """Rows ``ids`` (any integer shape; None: every row) of the weight, dequantized and rounded
    once to ``out_dtype``: [..., K]. Ids outside [0, N) raise IndexError."""
    data = np.asarray(data)
    if ids is None:
        rows = data
        lead: tuple[int, ...] = (data.shape[0],)
    else:
        idx = np.asarray(ids)
        n = data.shape[0]
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = np.argwhere((idx < 0) | (idx >= n))[0]
            raise IndexError(
                f"dequantize_gguf: ids{tuple(int(i) for i in bad)} = {int(idx[tuple(bad)])} is "
                f"out of range for a weight of {n} rows"
            )
        rows = data[idx.reshape(-1)]
        lead = idx.shape
    vals = dequantize_blocks(rows, fmt)
    k = vals.shape[1]
    return round_to(vals.astype(np.float64), np.dtype(out_dtype)).reshape(*lead, k)


def linear_gguf(x: Array, data: Array, bias: Array | None, *, fmt: str) -> Array:
    """x [..., K] @ dequant(W)^T + bias in float64, rounded once to x's dtype: [..., N]."""
    x = np.asarray(x)
    w = dequantize_blocks(data, fmt).astype(np.float64)
    y = x.astype(np.float64) @ w.T
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float64)
    return round_to(y, x.dtype)


def moe_linear_gguf(
    x: Array,
    data: Array,
    rows: Array,
    block_expert: Array,
    data_up: Array | None,
    row_scale: Array | None,
    *,
    top_k: int,
    block_m: int,
    fmt: str,
    experts: int,
) -> Array:
    """gp.moe_linear over GGUF-quantized experts: the experts' values (exact in float32)
    rounded to x's dtype, then the dense reference (backends/cpu/moe.py)."""
    from .moe import moe_linear

    xd = np.asarray(x).dtype

    def stack(d: Array) -> Array:
        vals = dequantize_blocks(d, fmt)
        return vals.reshape(experts, vals.shape[0] // experts, vals.shape[1]).astype(xd)

    up = stack(data_up) if data_up is not None else None
    return moe_linear(x, stack(data), rows, block_expert, up, row_scale, top_k=top_k,
                      block_m=block_m)  # fmt: skip
