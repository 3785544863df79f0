"""Scaled dot-product attention: a flash-attention forward pass (online softmax, no S x S matrix).

Numerics of pygpukit/backends/cpu/attention.py: out = softmax(scale * q k^T + mask) v with
scores, softmax statistics and the accumulator in float32, rounded once at the store. fp32
inputs use tl.dot with input_precision="ieee" (no tf32); fp16/bf16 use tensor cores with fp32
accumulation, the probabilities rounded to v's dtype before p @ v (as FlashAttention does). The
softmax runs in base 2: log2(e) is folded into the scale and exp2 replaces exp (Dao 2023); in
the unmasked key loop the row max is taken on the raw scores and scaled once, so each score
costs one FMA before exp2 (the Triton tutorial's form; it needs scale > 0, so a negative scale
negates q instead, which is exact). The causal mask is aligned to the end of the keys (query i
sees keys j <= i + Sk - Sq); a row that sees no key (Sk < Sq) gets zeros, like the reference.

Layout: q/k/v/out are read and written through their strides, so [B, H, S, D] memory and
[B, S, H, D] memory (passed as a transposed view) both run without copies; full speed needs a
unit stride on D. Variable-length batches (sdpa_varlen) use the FlashAttention packing:
q [total_q, H, D], k/v [total_k, Hkv, D], sequence b at rows cu_seqlens[b]:cu_seqlens[b + 1].

Design (Dao et al. 2022, FlashAttention-2 loop order): one program per (tile of query rows,
batch x kv head). Grouped-query heads are packed into the tile's rows position-major (row r is
query position r // GROUP of head hk * GROUP + r % GROUP, FlashAttention-3's PackGQA), so the
GROUP query heads that read one kv head share its loads, a tile's causal range stays one
contiguous diagonal band for any Sq, and decode (Sq = 1) fills a 16-row tile with GROUP heads.
Key blocks that every row of the tile sees run in a loop without any mask; the blocks past them
up to the tile's causal limit run in a second, masked loop; blocks past the limit are skipped.
Programs are ordered heaviest-first (the last causal tiles start first, so the light ones fill
the tail) within sections of heads whose K/V fit in half the L2 (FlashAttention-3's LPT
schedule). K/V tiles are loaded through pointers or, where the config asks and the strides
allow, through tensor descriptors (TMA on Hopper). Decode-shaped launches (few programs, many
keys) also split the keys over a second grid axis (flash-decoding): each split writes its
normalised partial output and log2-sum-exp in fp32, and a second kernel combines them.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl

from pygpukit import determinism
from pygpukit.backends.triton_kernels import interpreting
from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, new_out, next_pow2, sm_count
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty

__all__ = ["AttnConfig", "CONFIGS", "sdpa", "sdpa_varlen"]


@dataclass(frozen=True)
class AttnConfig:
    """One launch configuration of the forward kernel.

    block_m: packed query rows per program; block_n: keys per step of the inner loops;
    num_warps, num_stages: as in Triton (stages = K/V tiles in flight); loads: "ptr" (pointer
    loads, any strides) or "desc" (tensor descriptors: TMA on Hopper; used where D has unit
    stride and the other strides and base addresses are 16-byte aligned, pointer loads
    otherwise); warp_specialize: Triton's producer/consumer warp split of the key loops (Triton
    3.6 applies it on Blackwell only; on Hopper the kernel compiles as without it);
    head_section: heads per scheduling section (0: as many as keep their K/V in half the L2).
    """

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    loads: str = "ptr"
    warp_specialize: bool = False
    head_section: int = 0


# Prefill configuration per (BLOCK_D, element bits, causal): BLOCK_D is the head dim rounded up
# to a power of two (at least 64; 80 and 96 run as 128 with masked loads), element bits 16 for
# fp16/bf16 and 32 for fp32. The causal 16-bit D64/D128 rows are tuning/tune_attention.py's
# winners on an H200 (2026-11-21, bf16, torch 2.11 in the same run): B1 H32 S4096 D128 441
# TFLOP/s (torch flash backend 272, cuDNN 532), B4 H16 S4096 D64 372 (flash 264, cuDNN 414),
# B1 H16 S4096 D256 369 (flash 254, cuDNN 526; the previous 64x32/8-warp entry gave 106).
# The other rows are the first kernel's settings, not yet swept.
CONFIGS: dict[tuple[int, int, bool], AttnConfig] = {
    (64, 16, True): AttnConfig(128, 64, 8, 3, "ptr", False, 64),
    (64, 16, False): AttnConfig(128, 64, 8, 3),
    (128, 16, True): AttnConfig(64, 64, 4, 3, "desc", False, 4),
    (128, 16, False): AttnConfig(128, 64, 8, 3),
    (256, 16, True): AttnConfig(64, 32, 4, 2, "desc", False, 16),
    (256, 16, False): AttnConfig(64, 32, 8, 2),
    # fp32 tiles are twice the bytes: 64-row tiles, two stages.
    (64, 32, True): AttnConfig(64, 64, 4, 2),
    (64, 32, False): AttnConfig(64, 64, 4, 2),
    (128, 32, True): AttnConfig(64, 64, 4, 2),
    (128, 32, False): AttnConfig(64, 64, 4, 2),
    (256, 32, True): AttnConfig(64, 32, 8, 2),
    (256, 32, False): AttnConfig(64, 32, 8, 2),
}

LOG2E = 1.4426950408889634
MAX_SPLITS = 16
MAX_HEAD_DIM = 256


@triton.jit
def _kv_loop(
    acc, m_i, l_i, q, ksrc, vsrc, lo, hi, i_row, Sk, off, qk_scale, sk2, sv2,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, DESC: tl.constexpr, WS: tl.constexpr,
    PREC: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    # Keys [lo, hi) in steps of BLOCK_N. MASKED steps may run past Sk or cross the causal
    # diagonal; the others are seen by every row of the tile and run without any mask.
    dn = tl.arange(0, BLOCK_N)
    dk = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    for start in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        start = tl.multiple_of(start, BLOCK_N)
        n = start + dn
        if DESC:  # [BLOCK_N, BLOCK_D] boxes: rows past Sk and columns past D read as zeros
            kt = ksrc.load([start, 0]).T
        else:  # ksrc: k^T tile pointers [BLOCK_D, BLOCK_N] at key 0
            kp = ksrc + start.to(tl.int64) * sk2
            if MASKED:
                if D == BLOCK_D:
                    kt = tl.load(kp, mask=(n < Sk)[None, :], other=0.0)
                else:
                    kt = tl.load(kp, mask=(n < Sk)[None, :] & (dk < D)[:, None], other=0.0)
            else:
                if D == BLOCK_D:
                    kt = tl.load(kp)
                else:
                    kt = tl.load(kp, mask=(dk < D)[:, None], other=0.0)
        qk = tl.dot(q, kt, input_precision=PREC)
        if MASKED:
            vis = (n < Sk)[None, :]
            if CAUSAL:
                vis = vis & (n[None, :] <= (i_row + off)[:, None])
            qk = tl.where(vis, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            # A row that has seen no key yet keeps m = -inf: shift by 0 so exp2 gives 0, not NaN.
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(qk - m_use[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            m_use = m_new
            p = tl.math.exp2(qk * qk_scale - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)
        acc = acc * alpha[:, None]
        if DESC:
            vt = vsrc.load([start, 0])
        else:  # vsrc: [BLOCK_N, BLOCK_DV] pointers at key 0
            vp = vsrc + start.to(tl.int64) * sv2
            if MASKED:
                if DV == BLOCK_DV:
                    vt = tl.load(vp, mask=(n < Sk)[:, None], other=0.0)
                else:
                    vt = tl.load(vp, mask=(n < Sk)[:, None] & (dv < DV)[None, :], other=0.0)
            else:
                if DV == BLOCK_DV:
                    vt = tl.load(vp)
                else:
                    vt = tl.load(vp, mask=(dv < DV)[None, :], other=0.0)
        acc = tl.dot(p.to(vt.dtype), vt, acc, input_precision=PREC)
        # l after the dot: fewer registers live across it (the tutorial's order).
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _attn_fwd(
    Q, K, V, Out, OP, LSE, CuQ, CuK, qk_scale, nbh, Hkv, Sq, Sk, tiles, sec, chunk, scq, sck,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, so3,
    GROUP: tl.constexpr, CAUSAL: tl.constexpr, SPLIT: tl.constexpr, VARLEN: tl.constexpr,
    DESC: tl.constexpr, WS: tl.constexpr, PREC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    # Program -> (tile, b x kv head): sections of `sec` heads, heaviest tiles first in each.
    pid = tl.program_id(0)
    s = pid // (sec * tiles)
    rem = pid - s * (sec * tiles)
    nh = tl.minimum(sec, nbh - s * sec)
    t = rem // nh
    bh = s * sec + (rem - t * nh)
    tile = tiles - 1 - t
    b = bh // Hkv
    hk = bh - b * Hkv
    hk64 = hk.to(tl.int64)
    if VARLEN:  # sequence b: rows cu[b]:cu[b+1] of the packed token axis (stride s*2)
        q_lo = tl.load(CuQ + b * scq)
        k_lo = tl.load(CuK + b * sck)
        Sq = tl.load(CuQ + (b + 1) * scq) - q_lo
        Sk = tl.load(CuK + (b + 1) * sck) - k_lo
        qbase = q_lo.to(tl.int64) * sq2
        obase = q_lo.to(tl.int64) * so2
        kbase = k_lo.to(tl.int64) * sk2 + hk64 * sk1
        vbase = k_lo.to(tl.int64) * sv2 + hk64 * sv1
    else:
        qbase = b.to(tl.int64) * sq0
        obase = b.to(tl.int64) * so0
        kbase = b.to(tl.int64) * sk0 + hk64 * sk1
        vbase = b.to(tl.int64) * sv0 + hk64 * sv1
    R = GROUP * Sq
    off = Sk - Sq
    r0 = tile * BLOCK_M
    if VARLEN:
        if r0 >= R:  # the grid covers the longest sequence; this one is shorter
            return
    rows = r0 + tl.arange(0, BLOCK_M)
    rmask = rows < R
    i_row = rows // GROUP  # query position
    head = (hk * GROUP + (rows - i_row * GROUP)).to(tl.int64)
    dq = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    qp = Q + qbase + head[:, None] * sq1 + i_row.to(tl.int64)[:, None] * sq2 + dq[None, :] * sq3
    q = tl.load(qp, mask=rmask[:, None] & (dq < D)[None, :], other=0.0)
    # The unmasked loop takes the row max before scaling, which needs qk_scale >= 0.
    neg = qk_scale < 0.0
    q = tl.where(neg, -q, q)
    qk_scale = tl.where(neg, -qk_scale, qk_scale)

    # Key range of this tile: [lo, full) is visible to every row, [full, hi) needs the mask.
    i_lo = r0 // GROUP
    i_hi = (tl.minimum(r0 + BLOCK_M, R) - 1) // GROUP
    if CAUSAL:
        hi = tl.minimum(tl.maximum(i_hi + off + 1, 0), Sk)
        full = tl.minimum(tl.maximum(i_lo + off + 1, 0), Sk) // BLOCK_N * BLOCK_N
    else:
        hi = Sk
        full = Sk // BLOCK_N * BLOCK_N
    lo = 0
    if SPLIT:  # this program's share of the keys (chunk is a multiple of BLOCK_N)
        lo = tl.program_id(1) * chunk
        hi = tl.minimum(hi, lo + chunk)
        full = tl.maximum(tl.minimum(full, hi), lo)

    if DESC:
        ksrc = tl.make_tensor_descriptor(
            K + kbase, shape=[tl.maximum(Sk, 1), D], strides=[sk2, 1],
            block_shape=[BLOCK_N, BLOCK_D],
        )  # fmt: skip
        vsrc = tl.make_tensor_descriptor(
            V + vbase, shape=[tl.maximum(Sk, 1), DV], strides=[sv2, 1],
            block_shape=[BLOCK_N, BLOCK_DV],
        )  # fmt: skip
    else:
        dn = tl.arange(0, BLOCK_N).to(tl.int64)
        ksrc = K + kbase + dq[:, None].to(tl.int64) * sk3 + dn[None, :] * sk2
        vsrc = V + vbase + dn[:, None] * sv2 + dv[None, :].to(tl.int64) * sv3

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    acc, m_i, l_i = _kv_loop(
        acc, m_i, l_i, q, ksrc, vsrc, lo, full, i_row, Sk, off, qk_scale, sk2, sv2,
        MASKED=False, CAUSAL=CAUSAL, DESC=DESC, WS=WS, PREC=PREC, BLOCK_N=BLOCK_N,
        D=D, DV=DV, BLOCK_D=BLOCK_D, BLOCK_DV=BLOCK_DV,
    )  # fmt: skip
    acc, m_i, l_i = _kv_loop(
        acc, m_i, l_i, q, ksrc, vsrc, full, hi, i_row, Sk, off, qk_scale, sk2, sv2,
        MASKED=True, CAUSAL=CAUSAL, DESC=DESC, WS=WS, PREC=PREC, BLOCK_N=BLOCK_N,
        D=D, DV=DV, BLOCK_D=BLOCK_D, BLOCK_DV=BLOCK_DV,
    )  # fmt: skip
    seen = l_i > 0.0
    o = acc / tl.where(seen, l_i, 1.0)[:, None]  # rows that saw no key: acc is 0 -> zeros
    omask = rmask[:, None] & (dv[None, :] < DV)
    if SPLIT:
        part = (tl.program_id(1) * nbh + bh).to(tl.int64) * R + rows
        tl.store(OP + part[:, None] * DV + dv[None, :], o, mask=omask)
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
        tl.store(LSE + part, lse, mask=rmask)
    else:
        op = Out + obase + head[:, None] * so1 + i_row.to(tl.int64)[:, None] * so2
        tl.store(op + dv[None, :] * so3, o.to(Out.dtype.element_ty), mask=omask)


@triton.jit
def _attn_combine(
    Out, OP, LSE, Hkv, R, DV, nbh, so0, so1, so2, so3,
    GROUP: tl.constexpr, NS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    # One program per packed row: out = sum_s w_s o_s / sum_s w_s, w_s = 2^(lse_s - max lse).
    row = tl.program_id(0)
    bh = tl.program_id(1)
    s = tl.arange(0, BLOCK_S)
    dv = tl.arange(0, BLOCK_DV)
    part = (s * nbh + bh).to(tl.int64) * R + row
    lse = tl.load(LSE + part, mask=s < NS, other=float("-inf"))
    m = tl.max(lse, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m)
    op = tl.load(
        OP + part[:, None] * DV + dv[None, :],
        mask=(s < NS)[:, None] & (dv < DV)[None, :],
        other=0.0,
    )
    den = tl.sum(w, axis=0)
    o = tl.sum(op * w[:, None], axis=0) / tl.where(den > 0.0, den, 1.0)
    b = bh // Hkv
    hk = bh - b * Hkv
    i = row // GROUP
    head = hk * GROUP + (row - i * GROUP)
    dst = Out + b.to(tl.int64) * so0 + head.to(tl.int64) * so1 + i.to(tl.int64) * so2
    tl.store(dst + dv * so3, o.to(Out.dtype.element_ty), mask=dv < DV)


def pick_config(rows: int, bd: int, bits: int, causal: bool) -> AttnConfig:
    """The CONFIGS entry, with a smaller tile when there are fewer packed rows than it holds
    (decode, short prompts): 16/32/64 rows, 4 warps unless D=256 needs 8 for a 64-row tile,
    pointer loads (descriptor loads take Triton's slower host launch path: small calls are
    launch-bound)."""
    c = CONFIGS[(max(64, bd), bits, causal)]
    if rows >= c.block_m:
        return c
    return _small_tile(c, rows, bd)


@functools.lru_cache(maxsize=256)
def _small_tile(c: AttnConfig, rows: int, bd: int) -> AttnConfig:
    bm = max(16, next_pow2(rows))
    warps = c.num_warps if bm >= 64 and bd > 128 else min(c.num_warps, 4)
    return AttnConfig(bm, c.block_n, warps, c.num_stages, "ptr", c.warp_specialize, 0)


def _dims(a: GPUArray) -> tuple[int, ...]:
    st = tuple(a.element_strides)
    return st if a.ndim == 4 else (0, *st)


def _tok_dims(a: GPUArray) -> tuple[int, ...]:
    # Packed [T, H, D] as the kernel's (batch, head, position, dim) strides; no batch stride.
    st = a.element_strides
    return (0, st[1], st[0], st[2])


def _desc_ok(*arrays: GPUArray) -> bool:
    """Tensor descriptors need unit stride on D, 16-byte aligned other strides and bases."""
    for a in arrays:
        es = a.dtype.bits // 8
        st = a.element_strides
        if st[-1] != 1 or any((s * es) % 16 for s in st[:-1]) or a.data_ptr() % 16:
            return False
    return True


def _scratch(size: int, alignment: int, stream: Any) -> GPUArray:
    # Global memory for the tensor descriptors kernels build on the device (128 bytes each),
    # from pygpukit's pool on the current stream.
    from pygpukit.backends.triton_kernels.driver import runtime_empty

    return runtime_empty(max(size, 1), "int8")


def _use_desc(cfg: AttnConfig, *arrays: GPUArray) -> bool:
    if cfg.loads != "desc" or not _desc_ok(*arrays):
        return False
    if not interpreting():
        # Device-built descriptors take scratch memory at launch: give Triton pygpukit's pool
        # unless the caller installed an allocator of their own.
        from triton.runtime import _allocation

        if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
            triton.set_allocator(_scratch)
    return True


_l2_bytes: dict[Any, int] = {}


def _sections(cfg: AttnConfig, nbh: int, kv_bytes: int, x: GPUArray) -> int:
    """Heads per scheduling section: the config's, or as many as keep their K/V within half
    the L2 (the other half serves the tiles' Q and output streams)."""
    if cfg.head_section > 0:
        return min(nbh, cfg.head_section)
    dev = x.device
    if dev.type != "cuda":
        return max(1, min(nbh, 3))  # the interpreter: exercise several sections
    l2 = _l2_bytes.get(dev)
    if l2 is None:
        l2 = _l2_bytes[dev] = int(dev.properties.get("l2_cache_bytes", 50 << 20))
    return max(1, min(nbh, (l2 // 2) // max(kv_bytes, 1)))


def sdpa(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    *,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """Attention of q [B, H, Sq, D] over k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] -> [B, H, Sq, Dv]
    (or the same without B); written into out= when given."""
    return _sdpa(q, k, v, causal=causal, scale=scale, out=out)


def _check_dtype(op: str, q: GPUArray) -> None:
    # The routing table sends only these dtypes here (float64 runs on the NumPy backend).
    if q.dtype.name not in ("float32", "float16", "bfloat16"):
        raise TypeError(
            f"{op} (triton): dtype {q.dtype.name} is not supported (float16, bfloat16, float32)"
        )
    if max(q.shape[-1], 1) > MAX_HEAD_DIM:
        raise ValueError(f"{op} (triton): head dim {q.shape[-1]} exceeds {MAX_HEAD_DIM}")


def _sdpa(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    *,
    causal: bool,
    scale: float | None,
    out: GPUArray | None,
    num_splits: int | None = None,
    config: AttnConfig | None = None,
) -> GPUArray:
    """sdpa with the key-split count (None: from the shape) and the config (None: CONFIGS)
    forced, for tests and benchmarks/tuning/tune_attention.py."""
    _check_dtype("sdpa", q)
    if max(v.shape[-1], 1) > MAX_HEAD_DIM:
        raise ValueError(f"sdpa (triton): v head dim {v.shape[-1]} exceeds {MAX_HEAD_DIM}")
    o = new_out(out, (*q.shape[:-1], v.shape[-1]), q.dtype, q)
    batch = q.shape[0] if q.ndim == 4 else 1
    h, sq, d = q.shape[-3], q.shape[-2], q.shape[-1]
    hkv, sk, dv = k.shape[-3], k.shape[-2], v.shape[-1]
    if batch * h * sq * dv == 0:
        return o
    group = h // hkv
    rows = group * sq
    sm_scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    bits = 16 if q.dtype.name != "float32" else 32
    bd, bdv = max(16, next_pow2(d)), max(16, next_pow2(dv))
    cfg = config or pick_config(rows, max(bd, bdv), bits, bool(causal))
    bm, bn = cfg.block_m, cfg.block_n
    tiles = cdiv(rows, bm)
    nbh = batch * hkv
    # Flash-decoding: with fewer programs than SMs and many keys, split the keys too.
    ns = num_splits
    if ns is None:
        ns, progs = 1, tiles * nbh
        # The deterministic mode: no key split (its count follows the batch: rows of one
        # sequence would round differently beside other sequences).
        if progs < sm_count(q) and sk >= 4 * bn and not determinism._on[0]:
            ns = min(MAX_SPLITS, cdiv(sm_count(q), progs), cdiv(sk, 2 * bn))
    ns = max(1, min(int(ns), cdiv(max(sk, 1), bn)))
    chunk = cdiv(cdiv(max(sk, 1), bn), ns) * bn
    ns = cdiv(max(sk, 1), chunk)
    split = ns > 1
    if split:
        part = empty((ns * nbh * rows * dv,), "float32", q.device)
        lse = empty((ns * nbh * rows,), "float32", q.device)
    else:
        part = lse = o
    so = _dims(o)
    es = q.dtype.bits // 8
    sec = _sections(cfg, nbh, sk * (d + dv) * es, q)
    launch(
        _attn_fwd, (tiles * nbh, ns) if split else (tiles * nbh,),
        q, k, v, o, part, lse, q, q, sm_scale * LOG2E, nbh, hkv, sq, sk, tiles, sec, chunk, 0, 0,
        *_dims(q), *_dims(k), *_dims(v), *so,
        GROUP=group, CAUSAL=bool(causal), SPLIT=split, VARLEN=False,
        DESC=_use_desc(cfg, k, v), WS=cfg.warp_specialize, PREC="tf32" if bits == 16 else "ieee",
        BLOCK_M=bm, BLOCK_N=bn, D=d, DV=dv, BLOCK_D=bd, BLOCK_DV=bdv,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    if split:
        launch(
            _attn_combine, (rows, nbh),
            o, part, lse, hkv, rows, dv, nbh, *so,
            GROUP=group, NS=ns, BLOCK_S=max(2, next_pow2(ns)), BLOCK_DV=bdv,
            num_warps=4 if bdv <= 128 else 8,
        )  # fmt: skip
    return o


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
    config: AttnConfig | None = None,
) -> GPUArray:
    """Packed variable-length attention: q [total_q, H, D], k [total_k, Hkv, D],
    v [total_k, Hkv, Dv], int32 cu_seqlens [B + 1] on the device -> [total_q, H, Dv].
    max_seqlen_q/k (host ints, at least every sequence's length) size the grid, so nothing is
    read back from the device. config forces a launch configuration (tests, tuning)."""
    _check_dtype("sdpa_varlen", q)
    if max(v.shape[-1], 1) > MAX_HEAD_DIM:
        raise ValueError(f"sdpa_varlen (triton): v head dim {v.shape[-1]} exceeds {MAX_HEAD_DIM}")
    o = new_out(out, (*q.shape[:-1], v.shape[-1]), q.dtype, q)
    batch = cu_seqlens_q.shape[0] - 1
    h, d = q.shape[1], q.shape[2]
    hkv, dv = k.shape[1], v.shape[2]
    if batch <= 0 or max_seqlen_q <= 0 or q.shape[0] * h * dv == 0:
        return o
    group = h // hkv
    rows = group * max_seqlen_q
    sm_scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    bits = 16 if q.dtype.name != "float32" else 32
    bd, bdv = max(16, next_pow2(d)), max(16, next_pow2(dv))
    cfg = config or pick_config(rows, max(bd, bdv), bits, bool(causal))
    tiles = cdiv(rows, cfg.block_m)
    nbh = batch * hkv
    es = q.dtype.bits // 8
    sec = _sections(cfg, nbh, max_seqlen_k * (d + dv) * es, q)
    launch(
        _attn_fwd, (tiles * nbh,),
        q, k, v, o, o, o, cu_seqlens_q, cu_seqlens_k, sm_scale * LOG2E, nbh, hkv,
        max_seqlen_q, max_seqlen_k, tiles, sec, 0,
        cu_seqlens_q.element_strides[0], cu_seqlens_k.element_strides[0],
        *_tok_dims(q), *_tok_dims(k), *_tok_dims(v), *_tok_dims(o),
        GROUP=group, CAUSAL=bool(causal), SPLIT=False, VARLEN=True,
        DESC=_use_desc(cfg, k, v), WS=cfg.warp_specialize, PREC="tf32" if bits == 16 else "ieee",
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, D=d, DV=dv, BLOCK_D=bd, BLOCK_DV=bdv,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return o
