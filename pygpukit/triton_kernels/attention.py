"""Scaled dot-product attention: a flash-attention forward pass (online softmax, no S x S matrix).

Numerics of pygpukit/backends/cpu/attention.py: out = softmax(scale * q k^T + mask) v with
scores, softmax statistics and the accumulator in float32, rounded once at the store. fp32
inputs use tl.dot with input_precision="ieee" (no tf32); fp16/bf16 use tensor cores with fp32
accumulation, the probabilities rounded to v's dtype before p @ v (as FlashAttention does). The
softmax runs in base 2: log2(e) is folded into the scale and exp2 replaces exp (Dao 2023).
The causal mask is aligned to the end of the keys (query i sees keys j <= i + Sk - Sq); a row
that sees no key (Sk < Sq) gets zeros, like the reference.

Design (Dao et al. 2022, FlashAttention-2 loop order): one program per (tile of query rows,
batch x kv head). Grouped-query heads are packed into the tile's rows: row r of a (b, kv head)
is query head hk * GROUP + r // Sq at position r % Sq, so the GROUP query heads that read one
kv head share its loads, and decode (Sq = 1) fills a 16-row tile with GROUP heads instead of
wasting 15 of 16 rows. Key blocks that every row of the tile sees run without a mask; the
blocks past them up to the tile's causal limit run masked; blocks past the limit are skipped.
Decode-shaped launches (few programs, many keys) also split the keys over a third grid axis
(flash-decoding): each split writes its normalised partial output and log2-sum-exp in fp32,
and a second kernel combines them. q, k, v and out may have any strides (k/v are often views
of a larger KV cache); out is written in place.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math

import triton
import triton.language as tl

from pygpukit.creation import empty
from pygpukit.triton_kernels._common import GPUArray, cdiv, new_out, next_pow2, sm_count
from pygpukit.triton_kernels.driver import launch

__all__ = ["sdpa"]

LOG2E = 1.4426950408889634
MAX_SPLITS = 16


@triton.jit
def _attn_block(
    acc, m_i, l_i, q, K, V, kbase, vbase, start, rows_i, Sk, off, qk_scale,
    sk2, sk3, sv2, sv3, dq, dv, D, DV,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr,
    PREC: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # One key block: MASKED blocks may run past Sk or cross the causal diagonal.
    n = start + tl.arange(0, BLOCK_N)
    n64 = n.to(tl.int64)
    kp = K + kbase + dq[:, None] * sk3 + n64[None, :] * sk2  # k^T tile [BLOCK_D, BLOCK_N]
    vp = V + vbase + n64[:, None] * sv2 + dv[None, :] * sv3  # [BLOCK_N, BLOCK_DV]
    if MASKED:
        kt = tl.load(kp, mask=(n < Sk)[None, :] & (dq < D)[:, None], other=0.0)
        vt = tl.load(vp, mask=(n < Sk)[:, None] & (dv < DV)[None, :], other=0.0)
    else:
        if EVEN_D:
            kt = tl.load(kp)
        else:
            kt = tl.load(kp, mask=(dq < D)[:, None], other=0.0)
        if EVEN_DV:
            vt = tl.load(vp)
        else:
            vt = tl.load(vp, mask=(dv < DV)[None, :], other=0.0)
    qk = tl.dot(q, kt, input_precision=PREC) * qk_scale
    if MASKED:
        vis = (n < Sk)[None, :]
        if CAUSAL:
            vis = vis & (n[None, :] <= (rows_i + off)[:, None])
        qk = tl.where(vis, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        # A row that has seen no key yet keeps m = -inf: shift by 0 so exp2 gives 0, not NaN.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        m_use = m_new
    p = tl.math.exp2(qk - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision=PREC)
    return acc, m_new, l_i


@triton.jit
def _attn_fwd(
    Q, K, V, Out, OP, LSE, qk_scale, Hkv, Sq, Sk, R, D, DV, off, chunk,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, so3,
    GROUP: tl.constexpr, CAUSAL: tl.constexpr, SPLIT: tl.constexpr, PREC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hkv
    hk = bh - b * Hkv
    r0 = pid_m * BLOCK_M
    rows = r0 + tl.arange(0, BLOCK_M)
    rmask = rows < R
    g = rows // Sq  # head within the group
    rows_i = rows - g * Sq  # query position
    head = (hk * GROUP + g).to(tl.int64)
    dq = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    qp = Q + b.to(tl.int64) * sq0 + head[:, None] * sq1 + rows_i.to(tl.int64)[:, None] * sq2
    qmask = rmask[:, None] & (dq[None, :] < D)
    q = tl.load(qp + dq[None, :] * sq3, mask=qmask, other=0.0)
    kbase = b.to(tl.int64) * sk0 + hk.to(tl.int64) * sk1
    vbase = b.to(tl.int64) * sv0 + hk.to(tl.int64) * sv1

    # Key range of this tile: [0, full) is visible to every row, [full, hi) needs the mask.
    r1 = tl.minimum(r0 + BLOCK_M, R) - 1
    same = (r0 // Sq) == (r1 // Sq)
    min_i = tl.where(same, r0 % Sq, 0)
    max_i = tl.where(same, r1 % Sq, Sq - 1)
    if CAUSAL:
        hi = tl.minimum(tl.maximum(max_i + off + 1, 0), Sk)
        full = tl.minimum(tl.maximum(min_i + off + 1, 0), Sk) // BLOCK_N * BLOCK_N
    else:
        hi = Sk
        full = Sk // BLOCK_N * BLOCK_N
    lo = 0
    if SPLIT:  # this program's share of the keys (chunk is a multiple of BLOCK_N)
        lo = tl.program_id(2) * chunk
        hi = tl.minimum(hi, lo + chunk)
        full = tl.maximum(tl.minimum(full, hi), lo)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    for start in range(lo, full, BLOCK_N):
        acc, m_i, l_i = _attn_block(
            acc, m_i, l_i, q, K, V, kbase, vbase, start, rows_i, Sk, off, qk_scale,
            sk2, sk3, sv2, sv3, dq, dv, D, DV,
            MASKED=False, CAUSAL=False, EVEN_D=EVEN_D, EVEN_DV=EVEN_DV,
            PREC=PREC, BLOCK_N=BLOCK_N,
        )  # fmt: skip
    for start in range(full, hi, BLOCK_N):
        acc, m_i, l_i = _attn_block(
            acc, m_i, l_i, q, K, V, kbase, vbase, start, rows_i, Sk, off, qk_scale,
            sk2, sk3, sv2, sv3, dq, dv, D, DV,
            MASKED=True, CAUSAL=CAUSAL, EVEN_D=EVEN_D, EVEN_DV=EVEN_DV,
            PREC=PREC, BLOCK_N=BLOCK_N,
        )  # fmt: skip
    seen = l_i > 0.0
    o = acc / tl.where(seen, l_i, 1.0)[:, None]  # rows that saw no key: acc is 0 -> zeros
    omask = rmask[:, None] & (dv[None, :] < DV)
    if SPLIT:
        part = (tl.program_id(2) * tl.num_programs(1) + bh).to(tl.int64) * R + rows
        tl.store(OP + part[:, None] * DV + dv[None, :], o, mask=omask)
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
        tl.store(LSE + part, lse, mask=rmask)
    else:
        op = Out + b.to(tl.int64) * so0 + head[:, None] * so1 + rows_i.to(tl.int64)[:, None] * so2
        tl.store(op + dv[None, :] * so3, o.to(Out.dtype.element_ty), mask=omask)


@triton.jit
def _attn_combine(
    Out, OP, LSE, Hkv, Sq, R, DV, nbh, so0, so1, so2, so3,
    GROUP: tl.constexpr, NS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    # One program per query row: out = sum_s w_s o_s / sum_s w_s, w_s = 2^(lse_s - max lse).
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
    g = row // Sq
    i = row - g * Sq
    dst = Out + b.to(tl.int64) * so0 + (hk * GROUP + g).to(tl.int64) * so1 + i.to(tl.int64) * so2
    tl.store(dst + dv * so3, o.to(Out.dtype.element_ty), mask=dv < DV)


def _config(rows: int, bd: int, half: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for ``rows`` packed query rows per kv head."""
    bm = 16 if rows <= 16 else 32 if rows <= 32 else 64 if rows <= 64 else 128
    if bd > 128 or not half:  # registers/shared memory: fp32 tiles and D=256 use 64-row tiles
        bm = min(bm, 64)
    bn = 32 if bd > 128 else 64
    warps = 8 if bm == 128 or (bd > 128 and bm == 64) else 4
    stages = 2 if bd > 128 or not half else 3
    return bm, bn, warps, stages


def _dims(a: GPUArray) -> tuple[int, ...]:
    st = tuple(a.element_strides)
    return st if a.ndim == 4 else (0, *st)


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


def _sdpa(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    *,
    causal: bool,
    scale: float | None,
    out: GPUArray | None,
    num_splits: int | None = None,
) -> GPUArray:
    """sdpa with the key-split count forced (tests); None picks it from the shape."""
    # The routing table sends only these dtypes here (float64 runs on the NumPy backend).
    if q.dtype.name not in ("float32", "float16", "bfloat16"):
        raise TypeError(
            f"sdpa (triton): dtype {q.dtype.name} is not supported (float16, bfloat16, float32)"
        )
    o = new_out(out, (*q.shape[:-1], v.shape[-1]), q.dtype, q)
    batch = q.shape[0] if q.ndim == 4 else 1
    h, sq, d = q.shape[-3], q.shape[-2], q.shape[-1]
    hkv, sk, dv = k.shape[-3], k.shape[-2], v.shape[-1]
    if batch * h * sq * dv == 0:
        return o
    group = h // hkv
    rows = group * sq
    sm_scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    half = q.dtype.name != "float32"
    bd, bdv = max(16, next_pow2(d)), max(16, next_pow2(dv))
    bm, bn, warps, stages = _config(rows, max(bd, bdv), half)
    tiles = cdiv(rows, bm)
    nbh = batch * hkv
    # Flash-decoding: with fewer programs than SMs and many keys, split the keys too.
    ns = num_splits
    if ns is None:
        ns, progs = 1, tiles * nbh
        if progs < sm_count(q) and sk >= 4 * bn:
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
    launch(
        _attn_fwd, (tiles, nbh, ns) if split else (tiles, nbh),
        q, k, v, o, part, lse, sm_scale * LOG2E, hkv, sq, sk, rows, d, dv, sk - sq, chunk,
        *_dims(q), *_dims(k), *_dims(v), *so,
        GROUP=group, CAUSAL=bool(causal), SPLIT=split, PREC="tf32" if half else "ieee",
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, EVEN_D=bd == d, EVEN_DV=bdv == dv,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    if split:
        launch(
            _attn_combine, (rows, nbh),
            o, part, lse, hkv, sq, rows, dv, nbh, *so,
            GROUP=group, NS=ns, BLOCK_S=max(2, next_pow2(ns)), BLOCK_DV=bdv,
            num_warps=4 if bdv <= 128 else 8,
        )  # fmt: skip
    return o
