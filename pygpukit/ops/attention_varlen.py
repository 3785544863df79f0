"""Variable-length attention over a packed batch: sdpa_varlen (FlashAttention's varlen convention).

A batch of B sequences of different lengths is packed along the token axis: q [total_q, H, D],
k [total_k, Hkv, D], v [total_k, Hkv, Dv]; sequence b owns query rows
cu_seqlens_q[b]:cu_seqlens_q[b + 1] and key rows cu_seqlens_k[b]:cu_seqlens_k[b + 1].
cu_seqlens_q/k are int32 arrays of B + 1 cumulative lengths on the inputs' device, starting at
0, non-decreasing, cu_seqlens_q[B] == total_q and cu_seqlens_k[B] <= total_k. max_seqlen_q/k are
host ints at least as large as every sequence's query/key length: they size the GPU grid, so the
op never reads cu_seqlens back to the host (no sync). On the GPU these value constraints are the
caller's to keep (checking them would need that sync; rows a too-small max_seqlen_q leaves out
are not written); the NumPy backend checks them and raises ValueError.

Per sequence the result equals ``sdpa`` of that sequence alone: out = softmax(scale * q k^T +
mask) v in float32 (float64 for float64), scale = 1/sqrt(D) by default, GQA with query head h
reading kv head h // (H // Hkv), and the causal mask aligned to the end of each sequence's keys
(query i of a sequence sees keys j <= i + len_k - len_q; a query that sees no key gets zeros).
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["sdpa_varlen"]


def _max_seqlen(op: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or isinstance(value, GPUArray):
        raise TypeError(f"{op}: {name} must be a Python int, got {type(value).__name__}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a Python int, got {type(value).__name__}") from None
    if n < 0:
        raise ValueError(f"{op}: {name} must be >= 0, got {n}")
    return n


def sdpa_varlen(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    cu_seqlens_q: GPUArray,
    cu_seqlens_k: GPUArray,
    *,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """Attention of packed q [total_q, H, D] over k [total_k, Hkv, D], v [total_k, Hkv, Dv]
    -> [total_q, H, Dv], sequence by sequence as cu_seqlens_q/k [B + 1] (int32) delimit them."""
    op = "sdpa_varlen"
    for name, t in (("q", q), ("k", k), ("v", v)):
        chk.array(op, name, t)
        chk.floating(op, name, t)
        if t.ndim != 3:
            raise ValueError(
                f"{op}: {name} must be packed [total_tokens, heads, head_dim], got {chk.desc(t)}"
            )
    for name, t in (("k", k), ("v", v)):
        if t.dtype is not q.dtype:
            raise TypeError(f"{op}: {name} has {chk.desc(t)} but q has dtype {q.dtype.name}")
    h, hkv = q.shape[1], k.shape[1]
    if v.shape[1] != hkv:
        raise ValueError(f"{op}: v has {v.shape[1]} heads but k has {hkv} (v {chk.desc(v)})")
    if hkv == 0 or h % hkv:
        raise ValueError(
            f"{op}: k has {hkv} heads, which must divide q's {h} heads (k {chk.desc(k)})"
        )
    if k.shape[2] != q.shape[2]:
        raise ValueError(
            f"{op}: k has head dim {k.shape[2]} but q has {q.shape[2]} ({chk.desc(k)})"
        )
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"{op}: v has {v.shape[0]} tokens but k has {k.shape[0]} ({chk.desc(v)})")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        chk.int32_array(op, name, cu)
        if cu.ndim != 1 or cu.shape[0] < 1:
            raise ValueError(f"{op}: {name} must be 1-D with B + 1 offsets, got {chk.desc(cu)}")
    if cu_seqlens_k.shape != cu_seqlens_q.shape:
        raise ValueError(
            f"{op}: cu_seqlens_k has {cu_seqlens_k.shape[0]} entries but cu_seqlens_q has "
            f"{cu_seqlens_q.shape[0]} (both are B + 1)"
        )
    mq = _max_seqlen(op, "max_seqlen_q", max_seqlen_q)
    mk = _max_seqlen(op, "max_seqlen_k", max_seqlen_k)
    chk.scale_arg(op, scale)
    shape = (q.shape[0], h, v.shape[2])
    chk.out_arg(op, out, shape, q.dtype)
    params = {
        "max_seqlen_q": mq,
        "max_seqlen_k": mk,
        "causal": bool(causal),
        "scale": None if scale is None else float(scale),
    }
    return run(op, (q, k, v, cu_seqlens_q, cu_seqlens_k), params, out=out)
