"""Float64 references and cache builders for the decode-attention and KV-cache-write tests.

Written from the definitions with plain loops over sequences (no shared code with the NumPy
backend): key j of sequence b in a paged cache is cache[block_table[b, j // page], :, j % page].
The attention of one head is _attention_ref.head_ref, the reference of the sdpa tests.
"""

from __future__ import annotations

import math

import numpy as np
from _attention_ref import head_ref
from _data import as64, rand


def to_paged(
    rng: np.random.Generator, page: int, k_cache: np.ndarray, v_cache: np.ndarray, spare: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous caches [B, Hkv, S, D] as randomly placed pages: (k_pages, v_pages
    [num_blocks, Hkv, page, D], block_table int32 [B, ceil(S / page)]). Unused blocks and slots
    past S hold random values."""
    b, hkv, s, d = k_cache.shape
    per = -(-s // page)
    nblocks = b * per + spare
    table = rng.permutation(nblocks)[: b * per].reshape(b, per).astype(np.int32)
    out = []
    for cache in (k_cache, v_cache):
        paged = rng.standard_normal((nblocks, hkv, page, d)).astype(cache.dtype)
        for bi in range(b):
            for i in range(per):
                part = cache[bi, :, i * page : (i + 1) * page]
                paged[table[bi, i], :, : part.shape[1]] = part
        out.append(paged)
    return out[0], out[1], table


def decode_inputs(
    rng: np.random.Generator,
    batch: int,
    kv_heads: int,
    group: int,
    sq: int,
    d: int,
    s_max: int,
    dtype: str,
    page: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Random decode operands: q [batch, kv_heads * group, sq, d] and contiguous caches
    [batch, kv_heads, s_max, d], or (page given) the caches as randomly placed pages with their
    block table (to_paged). Returns (q, k_cache, v_cache, block_table or None)."""
    q = rand(rng, (batch, kv_heads * group, sq, d), dtype)
    kc, vc = (
        rand(rng, (batch, kv_heads, s_max, d), dtype),
        rand(rng, (batch, kv_heads, s_max, d), dtype),
    )
    if page is None:
        return q, kc, vc, None
    kc, vc, table = to_paged(rng, page, kc, vc)
    return q, kc, vc, table


def gather(cache: np.ndarray, b: int, n: int, table: np.ndarray | None) -> np.ndarray:
    """Keys 0..n-1 of sequence b as float64 [Hkv, n, D]."""
    if table is None:
        return as64(cache[b, :, :n])
    page = cache.shape[2]
    rows = [as64(cache[table[b, j // page], :, j % page]) for j in range(n)]
    if not rows:
        return np.zeros((cache.shape[1], 0, cache.shape[3]))
    return np.stack(rows, axis=1)


def ref_decode(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    lens: np.ndarray,
    table: np.ndarray | None = None,
    causal: bool = True,
    scale: float | None = None,
) -> np.ndarray:
    """float64 decode attention: query head h reads kv head h // (H // Hkv); query i of sequence
    b sees keys j < lens[b], and j <= i + lens[b] - Sq when causal; no visible key -> zeros."""
    q64 = as64(q)
    bsz, h, sq, d = q.shape
    hkv = k_cache.shape[1]
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    out = np.zeros((bsz, h, sq, d))
    for b in range(bsz):
        n = int(lens[b])
        k, v = gather(k_cache, b, n, table), gather(v_cache, b, n, table)
        for hi in range(h):
            kh = hi // (h // hkv)
            # gather gave the sequence's n keys, so head_ref's causal end-alignment
            # (j <= i + Sk - Sq) is the one above with Sk = n.
            out[b, hi] = head_ref(q64[b, hi], k[kh], v[kh], causal, sc)
    return out


def ref_rope_k(
    k: np.ndarray, pos: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str
) -> np.ndarray:
    """float64 rotation of k [B, Hkv, Sq, D] by the table rows pos [B, Sq] (pairs by index)."""
    half = cos.shape[1]
    c = as64(cos)[pos][:, None]  # [B, 1, Sq, half]
    s = as64(sin)[pos][:, None]
    x = as64(k)
    y = x.copy()
    i = np.arange(half)
    ia, ib = (2 * i, 2 * i + 1) if style == "gptj" else (i, i + half)
    a, b = x[..., ia], x[..., ib]
    y[..., ia] = a * c - b * s
    y[..., ib] = b * c + a * s
    return y


def ref_write(
    k_cache: np.ndarray,
    k: np.ndarray,
    start: np.ndarray,
    table: np.ndarray | None = None,
) -> np.ndarray:
    """float64 copy of k_cache with token j of k [B, Hkv, Sq, D] at start[b] + j."""
    out = as64(k_cache)
    k64 = as64(k)
    page = k_cache.shape[2]
    for b in range(k.shape[0]):
        for j in range(k.shape[2]):
            p = int(start[b]) + j
            if table is None:
                out[b, :, p] = k64[b, :, j]
            else:
                out[table[b, p // page], :, p % page] = k64[b, :, j]
    return out
