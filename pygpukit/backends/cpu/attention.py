"""Scaled dot-product attention (NumPy reference).

out = softmax(scale * q k^T + mask) v (Vaswani et al. 2017), scale = 1/sqrt(D) by default,
computed in float32 (float64 for float64) and rounded once to q's dtype. Grouped-query attention
(Ainslie et al. 2023): with H query heads and Hkv key/value heads, query head h reads kv head
h // (H // Hkv). The causal mask is aligned to the end of the key sequence (see softmax.py).
sdpa_varlen runs sdpa on each sequence of a packed batch (FlashAttention's varlen layout, see
pygpukit/ops/attention_varlen.py) and checks the cu_seqlens values the GPU path cannot.
"""

from __future__ import annotations

import math

import numpy as np

from ._common import Array, finish, float_compute_dtype, float_result
from .softmax import causal_mask, softmax_compute

__all__ = ["sdpa", "sdpa_varlen"]


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


def _offsets(name: str, cu: Array, total: int, exact: bool, max_len: int, max_name: str) -> Array:
    """cu_seqlens as int64, after checking what the GPU kernels assume without looking."""
    c = np.asarray(cu).astype(np.int64)
    if c.ndim != 1 or c.size < 1:
        raise ValueError(f"sdpa_varlen: {name} must be 1-D with B + 1 offsets, got {c.shape}")
    lens = np.diff(c)
    if c[0] != 0 or (lens < 0).any():
        raise ValueError(f"sdpa_varlen: {name} must start at 0 and never decrease, got {c}")
    if (c[-1] != total) if exact else (c[-1] > total):
        rel = "equal" if exact else "be at most"
        raise ValueError(f"sdpa_varlen: {name}[-1] = {c[-1]} must {rel} the {total} packed rows")
    if lens.size and lens.max() > max_len:
        raise ValueError(
            f"sdpa_varlen: a sequence has {lens.max()} rows in {name} but {max_name} is {max_len}"
        )
    return c


def sdpa_varlen(
    q: Array,
    k: Array,
    v: Array,
    cu_seqlens_q: Array,
    cu_seqlens_k: Array,
    *,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = True,
    scale: float | None = None,
) -> Array:
    """Packed q [Tq, H, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv] -> [Tq, H, Dv]: sdpa per sequence."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(
            "sdpa_varlen: q, k, v must be packed [tokens, heads, head_dim], "
            f"got {q.shape}, {k.shape}, {v.shape}"
        )
    if k.shape[0] != v.shape[0] or k.shape[1] != v.shape[1] or q.shape[2] != k.shape[2]:
        raise ValueError(f"sdpa_varlen: incompatible q {q.shape}, k {k.shape}, v {v.shape}")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"sdpa_varlen: query heads {q.shape[1]} must be a multiple of kv heads {k.shape[1]}"
        )
    if np.shape(cu_seqlens_q) != np.shape(cu_seqlens_k):
        raise ValueError(
            f"sdpa_varlen: cu_seqlens_q has {np.size(cu_seqlens_q)} entries but cu_seqlens_k "
            f"has {np.size(cu_seqlens_k)}"
        )
    cq = _offsets("cu_seqlens_q", cu_seqlens_q, q.shape[0], True, max_seqlen_q, "max_seqlen_q")
    ck = _offsets("cu_seqlens_k", cu_seqlens_k, k.shape[0], False, max_seqlen_k, "max_seqlen_k")
    rd = float_result(q.dtype)
    out = np.zeros((q.shape[0], q.shape[1], v.shape[2]), rd)
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    for b in range(cq.size - 1):
        q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if q1 == q0 or k1 == k0:  # no queries, or no keys: rows stay zero
            continue
        o = sdpa(
            q[q0:q1].swapaxes(0, 1),
            k[k0:k1].swapaxes(0, 1),
            v[k0:k1].swapaxes(0, 1),
            causal=causal,
            scale=sm_scale,
        )
        out[q0:q1] = o.swapaxes(0, 1)
    return out
