"""The split-key decode attention's partial outputs combined (attention_decode.py's fused
last-split combine and its combine kernel), and the store of a [rows, D] output tile into
[B, H, Sq, D]: out = sum_s w_s o_s / sum_s w_s over a (sequence, kv head, row tile)'s splits,
each split's partial output normalised, with its log2-sum-exp (fp32) beside it in the
workspace (pygpukit/backends/_support/scratch.py)."""

# Triton @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

__all__: list[str] = []


@triton.jit
def _store_out(Out, o, b, hk, rows, d, mask, Sq, so0, so1, so2, so3, GROUP: tl.constexpr):
    # rows / d: the packed query row (head g * Sq + token) and head-dim index of each element of
    # o, broadcastable to its shape (a [rows, D] tile, or the combine's flat row * D axis).
    g = rows // Sq
    qi = rows - g * Sq
    head = (hk * GROUP + g).to(tl.int64)
    op = Out + b.to(tl.int64) * so0 + head * so1 + qi.to(tl.int64) * so2 + d * so3
    tl.store(op, o.to(Out.dtype.element_ty), mask=mask)


@triton.jit
def _flat(x, S: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    """[S, BLOCK_R] (or [BLOCK_R] when S == 1) -> each value repeated over its row's BLOCK_D
    columns of the flat c = row * BLOCK_D + d axis: [S, BLOCK_R * BLOCK_D] (or [BLOCK_R *
    BLOCK_D])."""
    if S == 1:
        y = tl.reshape(tl.broadcast_to(x[:, None], [BLOCK_R, BLOCK_D]), [BLOCK_R * BLOCK_D])
    else:
        y = tl.reshape(
            tl.broadcast_to(x[:, :, None], [S, BLOCK_R, BLOCK_D]), [S, BLOCK_R * BLOCK_D]
        )
    return y


@triton.jit
def _combine(
    Out, WO, WL, pid, n_act, NS, b, hk, tile, Sq, R, D, so0, so1, so2, so3,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_S: tl.constexpr,
):  # fmt: skip
    # out = sum_s w_s o_s / sum_s w_s with w_s = l_s 2^(m_s - m) = 2^(lse_s - m), BLOCK_S splits
    # at a time. A split's partial output is BLOCK_R x BLOCK_D contiguous floats, combined here
    # as one flat axis c = row * BLOCK_D + d: the [BLOCK_S, BLOCK_R * BLOCK_D] tiles spread the
    # long contiguous axis over the threads and keep the split axis inside each thread, so the
    # max and the sums over splits need no shared memory or barrier, and each thread gathers the
    # lse of its own columns' row. H200 (tuning/diag_decode.py, 2026-11-21, batch 1, 16 splits):
    # the combine tail of the last split took 2.8-4.6 us with [BLOCK_S, BLOCK_R, BLOCK_D] tiles.
    c = tl.arange(0, BLOCK_R * BLOCK_D)
    r = c // BLOCK_D
    d = c - r * BLOCK_D
    rows = tile * BLOCK_M + r
    cmask = (rows < R) & (d < D)
    rr = tl.arange(0, BLOCK_R)
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    den = tl.zeros([BLOCK_R], tl.float32)
    acc = tl.zeros([BLOCK_R * BLOCK_D], tl.float32)
    base = pid.to(tl.int64) * NS
    for s0 in range(0, n_act, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        srow = (base + s)[:, None]
        # .cg: read from L2, where the other programs' partials are (never a stale L1 line).
        lse = tl.load(
            WL + srow * BLOCK_R + rr[None, :],
            mask=(s < n_act)[:, None] & (tile * BLOCK_M + rr < R)[None, :],
            other=float("-inf"),
            cache_modifier=".cg",
        )
        o = tl.load(
            WO + srow * (BLOCK_R * BLOCK_D) + c[None, :],
            mask=(s < n_act)[:, None] & cmask[None, :],
            other=0.0,
            cache_modifier=".cg",
        )
        m_new = tl.maximum(m, tl.max(lse, axis=0))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        # Exactly 1 for the split holding the maximum and for an unchanged maximum (as in
        # _decode_block): one split's partial comes out of the combine unchanged.
        w = tl.where(lse == m_use[None, :], 1.0, tl.math.exp2(lse - m_use[None, :]))
        alpha = tl.where(m_new == m, 1.0, tl.math.exp2(m - m_use))
        den = den * alpha + tl.sum(w, axis=0)
        acc = acc * _flat(alpha, 1, BLOCK_R, BLOCK_D) + tl.sum(
            o * _flat(w, BLOCK_S, BLOCK_R, BLOCK_D), axis=0
        )
        m = m_new
    den = _flat(den, 1, BLOCK_R, BLOCK_D)
    o = acc / tl.where(den > 0.0, den, 1.0)  # rows that saw no key: zeros
    _store_out(Out, o, b, hk, rows, d, cmask, Sq, so0, so1, so2, so3, GROUP=GROUP)
