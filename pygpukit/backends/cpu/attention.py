"""Scaled dot-product attention (NumPy reference).

out = softmax(scale * q k^T + mask) v (Vaswani et al. 2017), scale = 1/sqrt(D) by default,
computed in float32 (float64 for float64) and rounded once to q's dtype. Grouped-query attention
(Ainslie et al. 2023): with H query heads and Hkv key/value heads, query head h reads kv head
h // (H // Hkv). The causal mask is aligned to the end of the key sequence (see softmax.py).
"""

from __future__ import annotations

import math

import numpy as np

from ._common import Array, finish, float_compute_dtype, float_result
from .softmax import causal_mask, softmax_compute

__all__ = ["sdpa"]


def sdpa(
    q: Array,
    k: Array,
    v: Array,
    *,
    causal: bool = True,
    scale: float | None = None,
) -> Array:
    """q [B, H, Sq, D] (or [H, Sq, D]), k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] -> [B, H, Sq, Dv]."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(
            "sdpa: q, k, v must all be [B, H, S, D] or [H, S, D], "
            f"got {q.shape}, {k.shape}, {v.shape}"
        )
    h, hkv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != hkv or hkv == 0 or h % hkv:
        raise ValueError(
            f"sdpa: query heads {h} must be a multiple of kv heads {k.shape[-3]} / {v.shape[-3]}"
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"sdpa: incompatible q {q.shape}, k {k.shape}, v {v.shape}")
    rd = float_result(q.dtype)
    ct = float_compute_dtype(rd)
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    group = h // hkv
    kc = np.repeat(k.astype(ct), group, axis=-3)
    vc = np.repeat(v.astype(ct), group, axis=-3)
    with np.errstate(all="ignore"):
        s = np.matmul(q.astype(ct), np.swapaxes(kc, -1, -2)) * ct.type(sm_scale)
        mask = causal_mask(q.shape[-2], k.shape[-2]) if causal else None
        p = softmax_compute(s, -1, mask)
        return finish(np.matmul(p, vc), rd)
