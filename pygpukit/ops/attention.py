"""Scaled dot-product attention: sdpa and the 0.2.x sdpa_causal (sdpa_varlen: attention_varlen).

out = softmax(scale * q k^T + mask) v, scale = 1/sqrt(D) by default, computed in float32 (float64
for float64). Grouped-query attention: k/v may have Hkv heads with H % Hkv == 0 (MQA: Hkv = 1);
query head h reads kv head h // (H // Hkv). The causal mask is aligned to the end of the key
sequence (query i sees keys j <= i + Sk - Sq): a block of queries that sits at the end of a
longer key sequence (chunked prefill, decode with a KV cache) sees its whole prefix; a query
that sees no key (Sk < Sq) gets zeros.

Layout: the shapes are [B, H, S, D] (head-major, torch SDPA's convention) or [H, S, D]. That is
the native layout; token-major memory [B, S, H, D] (what a fused QKV projection writes) is
accepted through strides: pass the transposed view ``x.transpose(0, 2, 1, 3)`` (no copy). The
GPU kernel reads every operand through its strides, so k/v may also be views of a larger KV
cache; full speed wants a unit stride on D. On CUDA, head dims up to 256 run (64, 80, 96, 128
and 256 are the tuned ones; other sizes pad to the next power of two), in float16, bfloat16 and
float32; float64 runs on the NumPy backend.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["sdpa", "sdpa_causal"]


def sdpa(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    causal: bool = True,
    scale: float | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """Attention of q [B, H, Sq, D] over k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] -> [B, H, Sq, Dv]."""
    op = "sdpa"
    for name, t in (("q", q), ("k", k), ("v", v)):
        chk.array(op, name, t)
        chk.floating(op, name, t)
    if q.ndim not in (3, 4):
        raise ValueError(f"{op}: q must be [B, H, S, D] or [H, S, D], got {chk.desc(q)}")
    for name, t in (("k", k), ("v", v)):
        if t.ndim != q.ndim:
            raise ValueError(f"{op}: {name} has {chk.desc(t)} but q has {q.ndim} dims")
        if t.dtype is not q.dtype:
            raise TypeError(f"{op}: {name} has {chk.desc(t)} but q has dtype {q.dtype.name}")
        if q.ndim == 4 and t.shape[0] != q.shape[0]:
            raise ValueError(f"{op}: {name} has batch {t.shape[0]} but q has batch {q.shape[0]}")
    h, hkv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != hkv:
        raise ValueError(f"{op}: v has {v.shape[-3]} heads but k has {hkv} (v {chk.desc(v)})")
    if hkv == 0 or h % hkv:
        raise ValueError(
            f"{op}: k has {hkv} heads, which must divide q's {h} heads (k {chk.desc(k)})"
        )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"{op}: k has head dim {k.shape[-1]} but q has {q.shape[-1]} ({chk.desc(k)})"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"{op}: v has {v.shape[-2]} keys but k has {k.shape[-2]} ({chk.desc(v)})")
    chk.scale_arg(op, scale)
    shape = (*q.shape[:-1], v.shape[-1])
    chk.out_arg(op, out, shape, q.dtype)
    params = {"causal": bool(causal), "scale": None if scale is None else float(scale)}
    return run(op, (q, k, v), params, out=out)


def sdpa_causal(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    scale: float | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """Causal attention (0.2.x API): sdpa(q, k, v, causal=True, scale=scale)."""
    return sdpa(q, k, v, True, scale, out=out)
