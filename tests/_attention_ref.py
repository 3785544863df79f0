"""Float64 references for the sdpa and sdpa_varlen tests, plus packed-batch builders.

Written from the definitions (no code shared with the NumPy backend): query head h reads kv head
h // (H // Hkv); causal query i sees keys j <= i + Sk - Sq; a row that sees no key is zero. One
(batch, head) at a time, so a 4097 x 4097 score matrix is the largest thing held (134 MB).
"""

from __future__ import annotations

import math

import numpy as np
from _data import as64, rand


def head_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float) -> np.ndarray:
    """One head: q [Sq, D], k [Sk, D], v [Sk, Dv] (float64) -> [Sq, Dv]."""
    sq, sk = q.shape[0], k.shape[0]
    out = np.zeros((sq, v.shape[1]))
    if sq == 0 or sk == 0:
        return out
    s = (q @ k.T) * scale
    if causal:
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq), s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    den = e.sum(axis=1, keepdims=True)
    return np.asarray((e / np.where(den > 0, den, 1.0)) @ v)


def sdpa_ref(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float | None = None
) -> np.ndarray:
    """[B, H, Sq, D] (or [H, Sq, D]) attention in float64 from the rounded inputs."""
    q, k, v = as64(q), as64(k), as64(v)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lead = q.shape[:-3]
    h, hkv = q.shape[-3], k.shape[-3]
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for idx in np.ndindex(*lead, h):
        kv = (*idx[:-1], idx[-1] // (h // hkv))
        out[idx] = head_ref(q[idx], k[kv], v[kv], causal, sc)
    return out


def varlen_ref(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cu_q: np.ndarray,
    cu_k: np.ndarray,
    causal: bool,
    scale: float | None = None,
) -> np.ndarray:
    """Packed q [Tq, H, D], k/v [Tk, Hkv, D]: each sequence on its own, in float64."""
    q, k, v = as64(q), as64(k), as64(v)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    h, hkv = q.shape[1], k.shape[1]
    out = np.zeros((q.shape[0], h, v.shape[-1]))
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        for hi in range(h):
            kh = hi // (h // hkv)
            out[qs, hi] = head_ref(q[qs, hi], k[ks, kh], v[ks, kh], causal, sc)
    return out


def packed(
    rng: np.random.Generator,
    lens_q: list[int],
    lens_k: list[int],
    h: int,
    hkv: int,
    d: int,
    dtype: str,
    dv: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random packed q [sum lens_q, h, d], k/v [sum lens_k, hkv, d/dv] and int32 cu_seqlens."""
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rand(rng, (int(cu_q[-1]), h, d), dtype)
    k = rand(rng, (int(cu_k[-1]), hkv, d), dtype)
    v = rand(rng, (int(cu_k[-1]), hkv, dv or d), dtype)
    return q, k, v, cu_q, cu_k
