"""The NumPy reference of rmsnorm_qkv_rope_write (the attention block's first kernel at decode):
the float64 rmsnorm_linear, then kv_cache_write, exactly as the two ops compose."""

from __future__ import annotations

import numpy as np

from ._common import Array
from .attention_decode import kv_cache_write
from .gemv import rmsnorm_linear

__all__ = ["rmsnorm_qkv_rope_write"]


def rmsnorm_qkv_rope_write(
    x: Array,
    norm_weight: Array,
    w: Array,
    k_cache: Array,
    v_cache: Array,
    positions: Array,
    cos: Array,
    sin: Array,
    bias: Array | None = None,
    residual: Array | None = None,
    *,
    num_heads: int,
    eps: float,
    rope_style: str = "neox",
) -> Array | tuple[Array, Array]:
    """rmsnorm_linear (float64, one rounding to x's dtype), then kv_cache_write of its k and v
    rows at positions[b] + j with q rotated alike (gp.rope's numerics, one rounding): q
    [B, S, H, D], and (q, h) with a residual. x [B, S, K], w [(H + 2 Hkv) D, K]. Raises
    IndexError for a position outside the cache before anything is written."""
    res = rmsnorm_linear(x, norm_weight, w, bias, residual, eps=eps)
    y, h = res if isinstance(res, tuple) else (res, None)
    b, s, _ = np.asarray(x).shape
    hkv, d = np.asarray(k_cache).shape[1], np.asarray(k_cache).shape[3]
    heads = np.asarray(y).reshape(b, s, num_heads + 2 * hkv, d).transpose(0, 2, 1, 3)
    q = np.ascontiguousarray(heads[:, :num_heads])  # [B, H, S, D], rotated in place below
    k, v = heads[:, num_heads : num_heads + hkv], heads[:, num_heads + hkv :]
    kv_cache_write(k_cache, v_cache, k, v, positions, None, cos, sin, q, rope_style=rope_style)
    q = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
    return q if h is None else (q, h)
