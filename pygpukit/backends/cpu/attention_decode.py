"""Decode attention against a KV cache and the KV-cache write (NumPy reference).

Two cache layouts (the ones vLLM and FlashInfer use):
- contiguous: k_cache/v_cache [B, Hkv, S_max, D]; sequence b's key j is k_cache[b, :, j].
- paged: k_cache/v_cache [num_blocks, Hkv, block_size, D] plus block_table int [B, max_blocks];
  sequence b's key j is k_cache[block_table[b, j // block_size], :, j % block_size].

sdpa_decode: q [B, H, Sq, D] attends to the first cache_seqlens[b] keys of sequence b (the Sq new
tokens are already in the cache, they are its last Sq entries). The causal mask is aligned to the
end of those keys: query i sees keys j <= i + cache_seqlens[b] - Sq; a query that sees no key gets
zeros. Numerics are those of sdpa (float32, float64 for float64, one rounding). Under the
deterministic mode (pygpukit/determinism.py) each query row attends over exactly the keys it
sees, one row at a time, so its bits do not depend on Sq or on the other rows.

kv_cache_write: token j of k, v [B, Hkv, Sq, D] goes to cache position positions[b] + j of
sequence b, in place. With cos/sin tables ([max_pos, rotary_dim // 2], see rope.py) k is rotated
at that position first (the rope reference, rounded once to k's dtype); v is stored as given.
"""

from __future__ import annotations

import numpy as np

from pygpukit import determinism

from ._common import Array, float_result
from .attention import sdpa
from .norm import rmsnorm
from .rope import rope

__all__ = ["kv_cache_write", "sdpa_decode", "sdpa_decode_append"]


def _capacity(cache: Array, block_table: Array | None) -> int:
    return int(cache.shape[2]) * (1 if block_table is None else int(block_table.shape[1]))


def _lengths(op: str, lens: Array, batch: int, cap: int) -> Array:
    if lens.shape != (batch,) or lens.dtype.kind not in "iu":
        raise ValueError(f"{op}: lengths must be integers of shape ({batch},), got {lens.shape}")
    if lens.size and (int(lens.min()) < 0 or int(lens.max()) > cap):
        raise IndexError(
            f"{op}: lengths must lie in [0, {cap}] (the cache capacity), "
            f"got {int(lens.min())}..{int(lens.max())}"
        )
    return lens.astype(np.int64)


def _pages(op: str, block_table: Array, b: int, n_pages: int, num_blocks: int) -> Array:
    pages = block_table[b, :n_pages].astype(np.int64)
    if pages.size and (int(pages.min()) < 0 or int(pages.max()) >= num_blocks):
        raise IndexError(
            f"{op}: block_table row {b} names blocks {int(pages.min())}..{int(pages.max())} "
            f"but the cache has {num_blocks}"
        )
    return pages


def _gather(cache: Array, b: int, n: int, block_table: Array | None) -> Array:
    """The first n positions of sequence b as [Hkv, n, D]."""
    if block_table is None:
        return cache[b, :, :n]
    page = cache.shape[2]
    pages = _pages("sdpa_decode", block_table, b, -(-n // page), cache.shape[0])
    g = cache[pages]  # [n_pages, Hkv, page, D]
    return np.swapaxes(g, 0, 1).reshape(cache.shape[1], -1, cache.shape[3])[:, :n]


def sdpa_decode(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    cache_seqlens: Array,
    block_table: Array | None = None,
    *,
    causal: bool = True,
    scale: float | None = None,
) -> Array:
    """q [B, H, Sq, D] over the cached keys/values of each sequence -> [B, H, Sq, D]."""
    q, kc, vc = np.asarray(q), np.asarray(k_cache), np.asarray(v_cache)
    bt = None if block_table is None else np.asarray(block_table)
    if q.ndim != 4 or kc.ndim != 4 or vc.shape != kc.shape:
        raise ValueError(
            f"sdpa_decode: q must be [B, H, Sq, D] and the caches 4-D of one shape, got "
            f"{q.shape}, {kc.shape}, {vc.shape}"
        )
    batch, h, sq, _ = q.shape
    lens = _lengths("sdpa_decode", np.asarray(cache_seqlens), batch, _capacity(kc, bt))
    out = np.zeros((batch, h, sq, vc.shape[-1]), float_result(q.dtype))
    for b in range(batch):
        n = int(lens[b])
        if n == 0:
            continue  # no key: zeros
        k, v = _gather(kc, b, n, bt), _gather(vc, b, n, bt)
        if not determinism.is_deterministic():
            out[b] = sdpa(q[b : b + 1], k[None], v[None], causal=causal, scale=scale)[0]
            continue
        for i in range(sq):
            seen = n - sq + i + 1 if causal else n
            if seen > 0:
                row = q[b : b + 1, :, i : i + 1]
                kv = k[None, :, :seen], v[None, :, :seen]
                out[b, :, i] = sdpa(row, *kv, causal=False, scale=scale)[0, :, 0]
    return out


def kv_cache_write(
    k_cache: Array,
    v_cache: Array,
    k: Array,
    v: Array,
    positions: Array,
    block_table: Array | None = None,
    cos: Array | None = None,
    sin: Array | None = None,
    q: Array | None = None,
    *,
    rope_style: str = "neox",
    q_norm: Array | None = None,
    k_norm: Array | None = None,
    norm_eps: float = 0.0,
    qk_norm: bool = False,
) -> None:
    """Store k, v [B, Hkv, Sq, D] at positions[b] + j of each sequence, in place (k rotated first
    when cos/sin are given; q [B, H, Sq, D] rotated in place at the same positions when given;
    with k_norm / q_norm [D] each head RMS-normalised before its rotation: rmsnorm(k_norm,
    norm_eps) as gp.rmsnorm computes it, rounded to the dtype; qk_norm is the routing table's
    mark of such a call). Raises IndexError for a position
    outside the cache or a block id outside k_cache's blocks, before q is written."""
    kc, vc = np.asarray(k_cache), np.asarray(v_cache)
    k, v = np.asarray(k), np.asarray(v)
    bt = None if block_table is None else np.asarray(block_table)
    batch, _, sq, _ = k.shape
    cap = _capacity(kc, bt)
    start = np.asarray(positions)
    if start.shape != (batch,) or start.dtype.kind not in "iu":
        raise ValueError(
            f"kv_cache_write: positions must be integers of shape ({batch},), got {start.shape}"
        )
    if sq == 0:
        return
    pos = start.astype(np.int64)[:, None] + np.arange(sq)  # [B, Sq]
    wrong = np.flatnonzero((pos < 0).any(axis=1) | (pos >= cap).any(axis=1))
    if wrong.size:
        b = int(wrong[0])
        raise IndexError(
            f"kv_cache_write: sequence {b} writes positions {int(pos[b, 0])}..{int(pos[b, -1])} "
            f"but the cache holds {cap} slots"
        )
    if k_norm is not None:
        k = np.asarray(rmsnorm(k, k_norm, eps=norm_eps))
    if cos is not None:
        assert sin is not None
        r = 2 * np.asarray(cos).shape[1]
        kt = rope(np.swapaxes(k, 1, 2), cos, sin, pos, style=rope_style, rotary_dim=r)
        k = np.swapaxes(kt, 1, 2)  # [B, Sq, Hkv, D] token-major for rope, back to [B, Hkv, Sq, D]
    for b in range(batch):
        if bt is None:
            kc[b][:, pos[b]] = k[b]
            vc[b][:, pos[b]] = v[b]
        else:
            page = kc.shape[2]
            phys = bt[b, pos[b] // page].astype(np.int64)
            if int(phys.min()) < 0 or int(phys.max()) >= kc.shape[0]:
                raise IndexError(
                    f"kv_cache_write: block_table row {b} names blocks "
                    f"{int(phys.min())}..{int(phys.max())} but the cache has {kc.shape[0]}"
                )
            off = pos[b] % page
            # phys, off: [Sq] advanced indices around a slice -> the [Sq, Hkv, D] selection.
            kc[phys, :, off] = np.swapaxes(k[b], 0, 1)
            vc[phys, :, off] = np.swapaxes(v[b], 0, 1)
    if q is not None and cos is not None and sin is not None:
        qa = np.asarray(q)  # a view of q's memory: the rotation is stored in place
        qn = qa if q_norm is None else np.asarray(rmsnorm(qa, q_norm, eps=norm_eps))
        qa[...] = np.swapaxes(
            rope(np.swapaxes(qn, 1, 2), cos, sin, pos, style=rope_style, rotary_dim=r), 1, 2
        )


def sdpa_decode_append(
    q: Array,
    k_cache: Array,
    v_cache: Array,
    k: Array,
    v: Array,
    cache_seqlens: Array,
    block_table: Array | None = None,
    cos: Array | None = None,
    sin: Array | None = None,
    *,
    rope_style: str = "neox",
    q_norm: Array | None = None,
    k_norm: Array | None = None,
    norm_eps: float = 0.0,
    qk_norm: bool = False,
    causal: bool = True,
    scale: float | None = None,
) -> Array:
    """kv_cache_write of k, v at cache_seqlens[b] - Sq + j (q rotated on a copy: the caller's q
    is left as it was), then sdpa_decode of that q: the two references composed. Raises
    IndexError as they do."""
    qa = np.array(q, copy=True)
    batch, sq = qa.shape[0], qa.shape[2]
    lens = _lengths("sdpa_decode_append", np.asarray(cache_seqlens), batch,
                    _capacity(np.asarray(k_cache), block_table))  # fmt: skip
    start = lens.astype(np.int64) - sq
    kv_cache_write(
        k_cache, v_cache, k, v, start, block_table, cos, sin, qa if cos is not None else None,
        rope_style=rope_style, q_norm=q_norm, k_norm=k_norm, norm_eps=norm_eps,
    )  # fmt: skip
    return sdpa_decode(qa, k_cache, v_cache, lens, block_table, causal=causal, scale=scale)
