"""sdpa_decode, kv_cache_write and sdpa_decode_append on the native backend: the twins of
triton_kernels/attention_decode.py, same signatures and numerics
(pygpukit/backends/cpu/attention_decode.py); kernels in native/src/attention_decode/.

sdpa_decode runs the split-key tensor-core kernel (split_decode.cu) on float16/bfloat16 caches of
head dim 64, 80, 96, 128 or 256 with unit-stride, 16-byte aligned rows; every other call (float32,
float64, other head dims or layouts) runs the attention row kernel of
native/src/attention/attn_rows.cuh in its decode mode. Both are this backend's own kernels; the
choice depends only on dtypes, shapes and strides, never on values.

Lengths, write positions and block tables are int32 device arrays read by the kernels, so the
launch depends on shapes only (graph-replayable, no host sync). As on the Triton path, a length
outside [0, capacity] or a block id outside the cache turns that sequence's rows into NaN in
sdpa_decode, and kv_cache_write skips a token whose slot is outside the cache. Every array is
addressed through its element strides (q as a token-major view, caches as views of larger
buffers); out= is written in place whatever its layout. float16, bfloat16, float32, float64.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.scratch import decode_workspace, key_splits
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.backends.native.attention import _dims, _scale, check_operands
from pygpukit.backends.native.copy import copy
from pygpukit.backends.native.elementwise import gt, sub, where
from pygpukit.creation import empty

__all__ = ["kv_cache_write", "sdpa_decode", "sdpa_decode_append"]

_FLOATS = ("float32", "float16", "bfloat16", "float64")
_SPLIT_DIMS = (64, 80, 96, 128, 256)
_ROWS = 16  # query rows of a tile (the kernel's mma M)
_STEP = 16  # keys of a warp step; chunks are whole steps

# Split policy of the split-key kernel, read at every call (python tuning/diag_paged.py --native
# sweeps them). Head dims <= 128: a ring of STAGES 16-key steps a warp (3: 104 KiB of shared
# memory at D128; 4: 139 KiB) and PROGRAMS_PER_SM blocks per SM in one wave; D256: 2 stages,
# one block. H200, bf16 Hq32 Hkv8 D128 (docs/benchmark-notes.md): one block per SM was fastest
# at batch 1 (15.2 against 18.3 us at 4096 keys with two); two were faster at batch 16 in two runs
# of three (80.5 against 89.5 us at 4096 keys). 3 and 4 stages were within noise. Chunks of at
# least MIN_SPLIT_KEYS keys; a paged split holds at most MAX_ENTRIES table entries in shared
# memory.
STAGES = 3
PROGRAMS_PER_SM = 1
MIN_SPLIT_KEYS = 64
MAX_SPLITS = 256
MAX_ENTRIES = 2048
NUM_SPLITS: int | None = None  # forced split count (tests, tuning); None: the policy above


class SplitPlan(NamedTuple):
    splits: int
    chunk: int  # keys per split at full capacity
    floor: int  # fewest keys per split (the kernel spreads a length within [floor, chunk])
    tiles: int
    entries: int
    stages: int


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_plan(
    batch: int,
    heads: int,
    kv_heads: int,
    sq: int,
    head_dim: int,
    capacity: int,
    sms: int,
    page: int = 0,
    *,
    num_splits: int | None = None,
) -> SplitPlan:
    """The split-key launch for q [batch, heads, sq, head_dim] over ``capacity`` slots per
    sequence on ``sms`` multiprocessors; page: slots per page of a paged cache (0: contiguous).
    num_splits forces the split count (tests, tuning), within what the table entries allow."""
    tiles = _cdiv(heads // kv_heads * sq, _ROWS)
    progs = batch * kv_heads * tiles
    stages, per_sm = (STAGES, PROGRAMS_PER_SM) if head_dim <= 128 else (2, 1)
    at_least = 1
    if page:  # a split's table entries (chunk // page + 2) fit MAX_ENTRIES: at most `most` steps
        most = max(1, (MAX_ENTRIES - 2) * page // _STEP)
        at_least = _cdiv(capacity, most * _STEP)
    # No one-split reach (the kernel spreads every length over its splits from the floor on).
    ks = key_splits(
        capacity, _STEP, progs, per_sm * sms, min_keys=MIN_SPLIT_KEYS, max_splits=MAX_SPLITS,
        forced=num_splits, at_least=at_least,
    )  # fmt: skip
    entries = ks.chunk // page + 2 if page else 0
    return SplitPlan(ks.splits, ks.chunk, ks.floor, tiles, entries, stages)


@functools.cache
def _optin_smem(dev: Any) -> int:
    """Opt-in shared memory per block of dev, read once."""
    return int(dev.properties.get("max_shared_memory_per_block_optin", 0))


@functools.cache
def _smem(d: int, itemsize: int, entries: int, stages: int) -> int:
    """Shared memory of one split block, from the extension (the kernel's own layout)."""
    return int(extension().split_decode_smem(d, itemsize, entries, stages))


def _split_eligible(q: GPUArray, k: GPUArray, v: GPUArray, d: int) -> bool:
    """The split kernel's layout needs: half dtypes, its head dims, unit-stride 16-byte rows."""
    if q.dtype.name not in ("float16", "bfloat16") or d not in _SPLIT_DIMS:
        return False
    for c in (k, v):
        st = c.element_strides
        if st[3] != 1 or any(s % 8 for s in st[:3]) or c.data_ptr() % 16:
            return False
    return True


def _int32(op: str, name: str, t: GPUArray) -> None:
    if t.dtype.name != "int32":
        raise TypeError(f"{op} (native): {name} must be an int32 array, got {t.dtype.name}")


def _paging(
    op: str, cache: GPUArray, block_table: GPUArray | None
) -> tuple[int, int, int, int, int, int]:
    """(block_table pointer, its two strides, page, num_blocks, capacity per sequence)."""
    if block_table is None:
        return 0, 0, 0, 0, 0, cache.shape[2]
    _int32(op, "block_table", block_table)
    s0, s1 = block_table.element_strides
    page = cache.shape[2]
    return block_table.data_ptr(), s0, s1, page, cache.shape[0], page * block_table.shape[1]


def sdpa_decode(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    cache_seqlens: GPUArray,
    block_table: GPUArray | None = None,
    *,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """q [B, H, Sq, D] over a contiguous [B, Hkv, S_max, D] or paged [num_blocks, Hkv,
    block_size, D] cache (with block_table) -> [B, H, Sq, D], written into out= when given."""
    op = "sdpa_decode"
    check_operands(op, q, k_cache, v_cache)
    _int32(op, "cache_seqlens", cache_seqlens)
    o = out if out is not None else empty(q.shape, q.dtype, q.device)
    batch, h, sq, d = q.shape
    hkv = k_cache.shape[1]
    if batch * h * sq * d == 0:
        return o
    bt, s0, s1, page, nblocks, cap = _paging(op, k_cache, block_table)
    ext = extension()
    split: dict[str, int] = {}
    if _split_eligible(q, k_cache, v_cache, d):
        sms, optin = runtime.sm_count(q.device), _optin_smem(q.device)
        pl = split_plan(batch, h, hkv, sq, d, cap, sms, page, num_splits=NUM_SPLITS)
        if _smem(d, q.itemsize, pl.entries, pl.stages) <= optin:
            split = {"splits": pl.splits, "chunk": pl.chunk, "floor": pl.floor,
                     "tiles": pl.tiles, "entries": pl.entries, "stages": pl.stages}  # fmt: skip
            if pl.splits > 1:
                units = batch * hkv * pl.tiles
                ws = decode_workspace(q.device, units * pl.splits * _ROWS, d, units)
                assert ws.parts is not None and ws.lse is not None and ws.cnt is not None
                split.update(
                    parts=ws.parts.data_ptr(), lse=ws.lse.data_ptr(), counters=ws.cnt.data_ptr()
                )
    # fmt: off
    ext.sdpa_decode(
        q.device.index, stream_of(q), q.dtype.name, batch, h, hkv, sq, d,
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), o.data_ptr(),
        _dims(q), _dims(k_cache), _dims(v_cache), _dims(o),
        cache_seqlens.data_ptr(), cache_seqlens.element_strides[0], bt, s0, s1, page, nblocks,
        cap, _scale(d, scale), bool(causal), **split,
    )
    # fmt: on
    return o


def kv_cache_write(
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    positions: GPUArray,
    block_table: GPUArray | None = None,
    cos: GPUArray | None = None,
    sin: GPUArray | None = None,
    q: GPUArray | None = None,
    *,
    rope_style: str = "neox",
    q_norm: GPUArray | None = None,
    k_norm: GPUArray | None = None,
    norm_eps: float = 0.0,
    qk_norm: bool = False,
    out: GPUArray | None = None,
) -> None:
    """Store k, v [B, Hkv, Sq, D] at positions[b] + j of each sequence (k rotated when cos/sin
    are given), in place; returns None. ``out`` is the dispatcher's and must be None. The head
    norms (q_norm, k_norm, norm_eps, qk_norm) are the Triton twin's: this kernel does not
    normalise, the routing table sends such calls elsewhere and this adapter refuses them. q [B, H,
    Sq, D] (with cos/sin) is rotated in place at the same positions by the native rope kernel
    after the write, one launch a query token (the Triton twin does it in the same launch).

    The rotation reads cos/sin in the compute type (float32; float64 for float64 caches):
    tables of another dtype are converted first, which is what the reference does before use."""
    op = "kv_cache_write"
    if out is not None:
        raise ValueError("kv_cache_write writes the caches in place; it takes no out=")
    if qk_norm or q_norm is not None or k_norm is not None:
        raise ValueError(f"{op} (native): q_norm / k_norm are not supported (the Triton twin's)")
    if rope_style not in ("neox", "gptj"):
        raise ValueError(f"{op} (native): rope_style must be 'neox' or 'gptj', got {rope_style!r}")
    if k_cache.dtype.name not in _FLOATS:
        raise TypeError(f"{op} (native): dtype {k_cache.dtype.name} is not supported")
    for name, t in (("v_cache", v_cache), ("k", k), ("v", v)):
        if t.dtype is not k_cache.dtype:
            raise TypeError(
                f"{op} (native): {name} is {t.dtype.name} but k_cache is {k_cache.dtype.name}"
            )
    _int32(op, "positions", positions)
    if q is not None and q.dtype is not k.dtype:
        raise TypeError(f"{op} (native): q is {q.dtype.name} but k is {k.dtype.name}")
    if (cos is None) != (sin is None):
        raise ValueError(f"{op} (native): pass both cos and sin or neither")
    batch, hkv, sq, d = k.shape
    if batch * hkv * sq * d == 0:
        return
    bt, s0, s1, page, nblocks, cap = _paging(op, k_cache, block_table)
    ct = "float64" if k.dtype.name == "float64" else "float32"
    half, max_pos, cptr, sptr = 0, 0, 0, 0
    scos, ssin = (0, 0), (0, 0)
    if cos is not None and sin is not None:
        if cos.dtype.name != ct:
            cos = cos.astype(ct)
        if sin.dtype.name != ct:
            sin = sin.astype(ct)
        half, max_pos = cos.shape[1], cos.shape[0]
        if 2 * half > d or sin.shape != cos.shape:
            raise ValueError(f"{op} (native): cos/sin must be [max_pos, rotary_dim // 2 <= D / 2]")
        cptr, sptr = cos.data_ptr(), sin.data_ptr()
        scos = (cos.element_strides[0], cos.element_strides[1])
        ssin = (sin.element_strides[0], sin.element_strides[1])
    # fmt: off
    extension().kv_cache_write(
        k.device.index, stream_of(k), k.dtype.name, ct, batch, hkv, sq, d, half,
        rope_style == "gptj", k_cache.data_ptr(), v_cache.data_ptr(), k.data_ptr(), v.data_ptr(),
        _dims(k_cache), _dims(v_cache), _dims(k), _dims(v),
        positions.data_ptr(), positions.element_strides[0], bt, s0, s1, page, nblocks, cap,
        cptr, sptr, max_pos, scos, ssin,
    )
    # fmt: on
    if q is not None and cos is not None and sin is not None and q.size:
        from pygpukit.backends.native.elementwise import add
        from pygpukit.backends.native.rope import rope

        qt = q.transpose(0, 2, 1, 3)  # token-major [B, Sq, H, D], as rope takes it
        for j in range(sq):
            pj = positions if j == 0 else add(positions, j)
            tok = qt[:, j : j + 1]
            rope(tok, cos, sin, pj.reshape(batch, 1), style=rope_style, rotary_dim=2 * half,
                 out=tok)  # fmt: skip


def sdpa_decode_append(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    cache_seqlens: GPUArray,
    block_table: GPUArray | None = None,
    cos: GPUArray | None = None,
    sin: GPUArray | None = None,
    *,
    rope_style: str = "neox",
    q_norm: GPUArray | None = None,
    k_norm: GPUArray | None = None,
    norm_eps: float = 0.0,
    qk_norm: bool = False,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """The Triton one launch's twin as the launches it replaces, on this backend's kernels: the
    write positions cache_seqlens - Sq on the device (none written for a length past the
    cache), a copy of q rotated by kv_cache_write while it stores k and v, then sdpa_decode of
    that copy (the caller's q left as it was). Head norms are refused as kv_cache_write refuses
    them."""
    op = "sdpa_decode_append"
    if qk_norm or q_norm is not None or k_norm is not None:
        raise ValueError(f"{op} (native): q_norm / k_norm are not supported (the Triton twin's)")
    _int32(op, "cache_seqlens", cache_seqlens)
    sq = k.shape[2]
    cap = _paging(op, k_cache, block_table)[5]
    # A length past the cache writes none of its tokens (as the Triton kernel, which reads it
    # as 0): positions below 0 are skipped by the write.
    i32 = cache_seqlens.dtype  # int32 scalars keep the three launches in int32
    start = where(gt(cache_seqlens, np.int32(cap)), np.int32(-(cap + sq)),
                  sub(cache_seqlens, np.int32(sq), out_dtype=i32), out_dtype=i32)  # fmt: skip
    qr = copy(q) if cos is not None else q
    kv_cache_write(k_cache, v_cache, k, v, start, block_table, cos, sin,
                   qr if cos is not None else None, rope_style=rope_style)  # fmt: skip
    return sdpa_decode(qr, k_cache, v_cache, cache_seqlens, block_table, causal=causal,
                       scale=scale, out=out)  # fmt: skip
