"""Decode attention against a KV cache (sdpa_decode), the KV-cache write (kv_cache_write), and
both in one launch (sdpa_decode_append).

Cache layouts (those of vLLM and FlashInfer):
- contiguous (static, gpt-fast style): k_cache, v_cache [B, Hkv, S_max, D]; key j of sequence b
  is k_cache[b, :, j].
- paged: k_cache, v_cache [num_blocks, Hkv, block_size, D] and block_table int32
  [B, max_blocks_per_seq]; key j of sequence b lives in block block_table[b, j // block_size] at
  slot j % block_size. Entries past a sequence's length are never read.

Lengths and write positions are int32 arrays on the device and are read by the kernels, never by
the host: one launch of any of these ops replays under a captured CUDA graph with new lengths,
and the launch shape depends on the shapes only (S_max, or max_blocks * block_size). Because
nothing is read on the host, a length outside [0, capacity] or a block id outside the cache
cannot raise on the GPU: sdpa_decode then returns NaN for that sequence, kv_cache_write skips the
token (it never writes out of bounds), sdpa_decode_append does both. The NumPy backend raises
IndexError for all of them.
"""

from __future__ import annotations

from typing import Any

from pygpukit._memory import check_target, shares_elements
from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["kv_cache_write", "sdpa_decode", "sdpa_decode_append"]

_STYLES = ("neox", "gptj")


def _caches(op: str, k_cache: GPUArray, v_cache: GPUArray) -> None:
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        chk.array(op, name, t)
        chk.floating(op, name, t)
        if t.ndim != 4:
            raise ValueError(
                f"{op}: {name} must be [B, Hkv, S_max, D] (contiguous) or "
                f"[num_blocks, Hkv, block_size, D] (paged), got {chk.desc(t)}"
            )
    if v_cache.shape != k_cache.shape or v_cache.dtype is not k_cache.dtype:
        raise ValueError(
            f"{op}: v_cache has {chk.desc(v_cache)} but k_cache has {chk.desc(k_cache)}"
        )


def _int32_vector(op: str, name: str, t: Any, batch: int, like: GPUArray) -> None:
    chk.int32_array(op, name, t)
    if t.shape != (batch,):
        raise ValueError(f"{op}: {name} has {chk.desc(t)} but must have shape ({batch},)")
    if t.device != like.device:
        raise ValueError(f"{op}: {name} is on {t.device} but the caches are on {like.device}")


def _block_table(op: str, block_table: Any, batch: int, k_cache: GPUArray) -> int:
    """Cache capacity per sequence: S_max, or max_blocks * block_size when paged."""
    if block_table is None:
        if k_cache.shape[0] != batch:
            raise ValueError(
                f"{op}: k_cache has {chk.desc(k_cache)}, whose batch {k_cache.shape[0]} differs "
                f"from {batch} (pass block_table= for a paged cache)"
            )
        return int(k_cache.shape[2])
    chk.int32_array(op, "block_table", block_table)
    if block_table.ndim != 2 or block_table.shape[0] != batch or block_table.shape[1] == 0:
        raise ValueError(
            f"{op}: block_table has {chk.desc(block_table)} but must be "
            f"[{batch}, max_blocks_per_seq] with max_blocks_per_seq >= 1"
        )
    if block_table.device != k_cache.device:
        raise ValueError(
            f"{op}: block_table is on {block_table.device} but the caches are on {k_cache.device}"
        )
    if k_cache.shape[0] == 0 or k_cache.shape[2] == 0:
        raise ValueError(
            f"{op}: a paged k_cache needs blocks of >= 1 slot, got {chk.desc(k_cache)}"
        )
    return int(block_table.shape[1]) * int(k_cache.shape[2])


def sdpa_decode(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    cache_seqlens: GPUArray,
    *,
    block_table: GPUArray | None = None,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """Attention of q [B, H, Sq, D] (a few new tokens per sequence) over the first
    cache_seqlens[b] cached keys/values of each sequence -> [B, H, Sq, D] (or out=).

    cache_seqlens: int32 [B] on the device, the number of valid keys of each sequence including
    the Sq new ones (already written, e.g. by kv_cache_write). causal: query i sees keys
    j <= i + cache_seqlens[b] - Sq (end-aligned); a query that sees no key gets zeros. scale:
    1/sqrt(D) by default. Grouped-query attention: query head h reads kv head h // (H // Hkv).
    Built for Sq of 1..16 (decode, speculative verification); any Sq works, and under the
    deterministic mode the engine prefills through it too (flash gp.sdpa is faster there).
    """
    op = "sdpa_decode"
    chk.array(op, "q", q)
    chk.floating(op, "q", q)
    if q.ndim != 4:
        raise ValueError(f"{op}: q must be [B, H, Sq, D], got {chk.desc(q)}")
    _caches(op, k_cache, v_cache)
    if k_cache.dtype is not q.dtype:
        raise TypeError(f"{op}: k_cache has {chk.desc(k_cache)} but q has dtype {q.dtype.name}")
    if k_cache.device != q.device:
        raise ValueError(f"{op}: k_cache is on {k_cache.device} but q is on {q.device}")
    batch, h, _, d = q.shape
    hkv = k_cache.shape[1]
    if hkv == 0 or h % hkv:
        raise ValueError(
            f"{op}: k_cache has {hkv} heads, which must divide q's {h} heads "
            f"(k_cache {chk.desc(k_cache)})"
        )
    if k_cache.shape[3] != d:
        raise ValueError(
            f"{op}: k_cache has head dim {k_cache.shape[3]} but q has {d} ({chk.desc(k_cache)})"
        )
    _block_table(op, block_table, batch, k_cache)
    _int32_vector(op, "cache_seqlens", cache_seqlens, batch, k_cache)
    chk.scale_arg(op, scale)
    chk.out_arg(op, out, q.shape, q.dtype)
    params = {"causal": bool(causal), "scale": None if scale is None else float(scale)}
    return run(op, (q, k_cache, v_cache, cache_seqlens, block_table), params, out=out)


def kv_cache_write(
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    positions: GPUArray,
    *,
    block_table: GPUArray | None = None,
    cos: GPUArray | None = None,
    sin: GPUArray | None = None,
    rope_style: str = "neox",
    q: GPUArray | None = None,
    q_norm: GPUArray | None = None,
    k_norm: GPUArray | None = None,
    norm_eps: float = 1e-6,
) -> None:
    """Store the new tokens k, v [B, Hkv, Sq, D] into the caches, in place: token j of sequence b
    goes to cache position positions[b] + j (positions: int32 [B] on the device). Returns None.

    With cos/sin (the [max_pos, rotary_dim // 2] tables of gp.rope_tables) k is rotated at its
    cache position while it is written (gp.rope's numerics, rope_style "neox" or "gptj", dims past
    rotary_dim unrotated); v never is. A position outside the cache is not written on the GPU (the
    NumPy backend raises IndexError); a position past the tables gives NaN in the rotated dims, as
    gp.rope does. q [B, H, Sq, D] (the same tokens' queries, H a multiple of Hkv, any strides;
    needs cos/sin, no element shared with k, v, the caches or the tables) is rotated in place at
    the same positions in the same launch, with gp.rope's numerics; a position outside the cache
    still rotates q on the GPU.

    k_norm / q_norm ([D] weights; Qwen3's RMSNorm of each head over head_dim before RoPE)
    normalise each head of k / q first, in the same launch, with gp.rmsnorm(.., norm_eps)'s
    arithmetic (statistics in float32, float64 for float64 caches, the normalised values
    rounded to the dtype; on the GPU the sum of squares runs in another order, so a value may
    differ from gp.rmsnorm's in the last place), then rotate them. They
    need the tables over the whole head (rotary_dim == D), and q_norm needs q. (Only the Triton
    kernel and the NumPy reference take them: the routing table sends such calls there.)
    """
    op = "kv_cache_write"
    _caches(op, k_cache, v_cache)
    batch, hkv, sq, d = _new_tokens(op, k_cache, v_cache, k, v, block_table)
    _int32_vector(op, "positions", positions, batch, k_cache)
    _tables(op, cos, sin, rope_style, d, k_cache)
    if q is not None:
        chk.array(op, "q", q)
        if cos is None:
            raise ValueError(f"{op}: q is rotated with the tables: pass cos and sin with q")
        _queries(op, q, batch, sq, d, hkv, k_cache)
        named: dict[str, GPUArray | None] = {
            "k_cache": k_cache, "v_cache": v_cache, "k": k, "v": v, "cos": cos, "sin": sin,
            "positions": positions, "block_table": block_table,
        }  # fmt: skip
        for name, other in named.items():
            if other is not None and shares_elements(q, other):
                raise ValueError(
                    f"{op}: q shares elements with {name}; q is rotated in place while the "
                    "launch reads it"
                )
        check_target(q, f"{op}: q")
    params: dict[str, object] = {"rope_style": rope_style}
    if q_norm is not None or k_norm is not None:
        params |= _head_norms(op, q_norm, k_norm, norm_eps, q, cos, k_cache, v_cache)
    check_target(k_cache, f"{op}: k_cache")
    check_target(v_cache, f"{op}: v_cache")
    inputs = (k_cache, v_cache, k, v, positions, block_table, cos, sin, q)
    run(op, inputs, params)


def sdpa_decode_append(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    cache_seqlens: GPUArray,
    *,
    block_table: GPUArray | None = None,
    cos: GPUArray | None = None,
    sin: GPUArray | None = None,
    rope_style: str = "neox",
    q_norm: GPUArray | None = None,
    k_norm: GPUArray | None = None,
    norm_eps: float = 1e-6,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """The decode step's cache write and attention in one launch: kv_cache_write(k_cache,
    v_cache, k, v, cache_seqlens - Sq, q=..., ...) followed by sdpa_decode(q, k_cache, v_cache,
    cache_seqlens), with these differences:

    - the write positions are not an input: token j of sequence b goes to cache position
      cache_seqlens[b] - Sq + j (the new tokens are the last Sq of the new length);
    - q is rotated (and normalised with q_norm) in registers for the attention and left as it
      was in memory; the caches are written in place as kv_cache_write writes them;
    - the result is [B, H, Sq, D] (or out=), as sdpa_decode's.

    Arguments are those of the two ops. A length outside [0, capacity]: on the GPU that
    sequence's output is NaN and none of its tokens is written (the two ops would write those
    that fit); a length shorter than Sq writes the tokens at positions >= 0. The NumPy backend
    raises IndexError for both. The rotation and the norms compute what kv_cache_write computes
    (the same expressions: the same bits for the rotation; a head norm's sum of squares may run
    in another order); the attention is sdpa_decode's kernel. Each split of the keys writes the
    new tokens among its own keys and reads them back itself, so no second launch, and no wait
    on one, separates the write from the attention.
    """
    op = "sdpa_decode_append"
    _caches(op, k_cache, v_cache)
    batch, hkv, sq, d = _new_tokens(op, k_cache, v_cache, k, v, block_table)
    _queries(op, q, batch, sq, d, hkv, k_cache)
    _int32_vector(op, "cache_seqlens", cache_seqlens, batch, k_cache)
    _tables(op, cos, sin, rope_style, d, k_cache)
    chk.scale_arg(op, scale)
    chk.out_arg(op, out, q.shape, q.dtype)
    params: dict[str, object] = {
        "rope_style": rope_style, "causal": bool(causal),
        "scale": None if scale is None else float(scale),
    }  # fmt: skip
    if q_norm is not None or k_norm is not None:
        params |= _head_norms(op, q_norm, k_norm, norm_eps, q, cos, k_cache, v_cache)
    read: dict[str, GPUArray | None] = {
        "q": q, "k": k, "v": v, "cos": cos, "sin": sin, "cache_seqlens": cache_seqlens,
        "block_table": block_table, "q_norm": q_norm, "k_norm": k_norm, "out": out,
    }  # fmt: skip
    for name, other in read.items():
        for cname, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
            if other is not None and shares_elements(other, cache):
                raise ValueError(
                    f"{op}: {name} shares elements with {cname}, which the launch writes"
                )
    # Row tiles and splits of one head write out while others still read the new tokens and
    # their queries (out exactly q is safe: a program reads its own rows of q before it writes
    # them).
    if out is not None:
        in_place = (
            out.data_ptr() == q.data_ptr()
            and out.shape == q.shape
            and (out.element_strides == q.element_strides)
        )
        for name in ("k", "v", "cos", "sin", "q_norm", "k_norm", "q"):
            other = read[name]
            if other is None or (name == "q" and in_place):
                continue
            if shares_elements(out, other):
                raise ValueError(f"{op}: out shares elements with {name}, which the launch reads")
    check_target(k_cache, f"{op}: k_cache")
    check_target(v_cache, f"{op}: v_cache")
    inputs = (q, k_cache, v_cache, k, v, cache_seqlens, block_table, cos, sin)
    return run(op, inputs, params, out=out)


def _new_tokens(
    op: str,
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    block_table: GPUArray | None,
) -> tuple[int, int, int, int]:
    """The new tokens k, v checked against the caches: (B, Hkv, Sq, D)."""
    for name, t in (("k", k), ("v", v)):
        chk.array(op, name, t)
        if t.ndim != 4:
            raise ValueError(f"{op}: {name} must be [B, Hkv, Sq, D], got {chk.desc(t)}")
        if t.dtype is not k_cache.dtype:
            raise TypeError(
                f"{op}: {name} has {chk.desc(t)} but the caches have dtype {k_cache.dtype.name}"
            )
        if t.device != k_cache.device:
            raise ValueError(
                f"{op}: {name} is on {t.device} but the caches are on {k_cache.device}"
            )
    if v.shape != k.shape:
        raise ValueError(f"{op}: v has {chk.desc(v)} but k has {chk.desc(k)}")
    batch, hkv, sq, d = k.shape
    if hkv != k_cache.shape[1] or d != k_cache.shape[3]:
        raise ValueError(
            f"{op}: k has {chk.desc(k)} but k_cache has {chk.desc(k_cache)}: the heads "
            f"(dim 1) and head dims (dim 3) must match"
        )
    cap = _block_table(op, block_table, batch, k_cache)
    if sq > cap:
        raise ValueError(f"{op}: k has {sq} new tokens but the cache holds {cap} per sequence")
    return batch, hkv, sq, d


def _tables(
    op: str,
    cos: GPUArray | None,
    sin: GPUArray | None,
    rope_style: str,
    d: int,
    k_cache: GPUArray,
) -> None:
    """The rotation's style and tables checked (head dim d)."""
    chk.choice(op, "rope_style", rope_style, _STYLES)
    if (cos is None) != (sin is None):
        raise ValueError(f"{op}: pass both cos and sin (rotary tables) or neither")
    if cos is not None:
        assert sin is not None
        for name, t in (("cos", cos), ("sin", sin)):
            chk.array(op, name, t)
            chk.floating(op, name, t)
            if t.device != k_cache.device:
                raise ValueError(
                    f"{op}: {name} is on {t.device} but the caches are on {k_cache.device}"
                )
        if cos.ndim != 2 or cos.shape[1] == 0 or 2 * cos.shape[1] > d:
            raise ValueError(
                f"{op}: cos has {chk.desc(cos)} but must be [max_pos, rotary_dim // 2] with "
                f"0 < rotary_dim <= {d} (k's head dim)"
            )
        chk.rope_table_pair(op, cos, sin)


def _queries(
    op: str, q: GPUArray, batch: int, sq: int, d: int, hkv: int, k_cache: GPUArray
) -> None:
    """q [B, H, Sq, D] of the new tokens checked: k's batch, tokens and head dim, H a positive
    multiple of Hkv, the caches' dtype and device."""
    chk.array(op, "q", q)
    if q.ndim != 4 or q.shape[0] != batch or q.shape[2] != sq or q.shape[3] != d:
        raise ValueError(
            f"{op}: q has {chk.desc(q)} but must be [{batch}, H, {sq}, {d}] (k's batch, "
            "tokens and head dim)"
        )
    if hkv == 0 or q.shape[1] == 0 or q.shape[1] % hkv:
        raise ValueError(
            f"{op}: q has {q.shape[1]} heads; it must be a positive multiple of k's {hkv}"
        )
    if q.dtype is not k_cache.dtype:
        raise TypeError(f"{op}: q has {chk.desc(q)} but the caches have dtype {k_cache.dtype.name}")
    if q.device != k_cache.device:
        raise ValueError(f"{op}: q is on {q.device} but the caches are on {k_cache.device}")


def _head_norms(
    op: str,
    q_norm: GPUArray | None,
    k_norm: GPUArray | None,
    eps: float,
    q: GPUArray | None,
    cos: GPUArray | None,
    k_cache: GPUArray,
    v_cache: GPUArray,
) -> dict[str, object]:
    """kv_cache_write's q_norm / k_norm checked; the call's extra parameters."""
    from pygpukit.ops.norm import eps_arg

    d = k_cache.shape[3]
    if cos is None or 2 * cos.shape[1] != d:
        raise ValueError(
            f"{op}: q_norm / k_norm need cos and sin over the whole head (rotary_dim == {d}): "
            "the heads are normalised, then rotated, in one launch"
        )
    if q_norm is not None and q is None:
        raise ValueError(f"{op}: q_norm normalises q: pass q with it")
    for name, w in (("q_norm", q_norm), ("k_norm", k_norm)):
        if w is None:
            continue
        chk.array(op, name, w)
        chk.floating(op, name, w)
        if w.shape != (d,):
            raise ValueError(f"{op}: {name} has {chk.desc(w)} but must be [{d}] (the head dim)")
        if w.device != k_cache.device:
            raise ValueError(
                f"{op}: {name} is on {w.device} but the caches are on {k_cache.device}"
            )
        for other, what in ((q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache")):
            if other is not None and shares_elements(other, w):
                raise ValueError(f"{op}: {what} shares elements with {name}; the launch writes it")
    return {"q_norm": q_norm, "k_norm": k_norm, "norm_eps": eps_arg(op, eps), "qk_norm": True}
