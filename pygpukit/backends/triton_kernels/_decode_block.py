"""One key block of the decode attention kernel (attention_decode.py's _decode_fwd): the scores
of the block against the packed query rows, the online-softmax update of the rows' running
maximum, sum and accumulator, and, for a paged cache, the block's table entries.

Numerics as the kernel's docstring says: scores and statistics in float32, base-2 softmax with
log2(e) folded into the scale, probabilities rounded to v's dtype before p @ v on tensor cores
(fp32 inputs: input_precision="ieee").
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

__all__: list[str] = []


@triton.jit
def _table(BT, bt_row, start, end, sbt1, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """Block ids of the keys start..start+BLOCK_N-1 (0 past ``end``): one id when a page holds
    whole key blocks; a few whole pages per block: one scalar load a page, spread over its keys
    with selects (a per-key gather would need its values moved into the K tile's layout through
    shared memory); else one per key."""
    if PAGE % BLOCK_N == 0:
        phys = tl.load(BT + bt_row + (start // PAGE) * sbt1, mask=start < end, other=0)
    elif BLOCK_N % PAGE == 0 and BLOCK_N // PAGE <= 8:
        page = tl.arange(0, BLOCK_N) // PAGE
        phys = tl.zeros([BLOCK_N], tl.int32)
        for j in tl.static_range(BLOCK_N // PAGE):
            first = start + j * PAGE
            pj = tl.load(BT + bt_row + (first // PAGE) * sbt1, mask=first < end, other=0)
            phys = tl.where(page == j, pj, phys)
    else:
        n = start + tl.arange(0, BLOCK_N)
        phys = tl.load(BT + bt_row + (n // PAGE) * sbt1, mask=n < end, other=0)
    return phys


@triton.jit
def _decode_block(
    acc, m_i, l_i, bad, q, K, V, phys, kb, vb, start, L, lim, nblocks, qk_scale,
    sk0, sk2, sk3, sv0, sv2, sv3, d, D,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, PAGED: tl.constexpr, PAGE: tl.constexpr,
    EVEN_D: tl.constexpr, PREC: tl.constexpr, BLOCK_N: tl.constexpr, ROW_SUMS_LAST: tl.constexpr,
):  # fmt: skip
    # One block of BLOCK_N keys; MASKED blocks may run past the length or cross the diagonal.
    # phys: the block's table entries (_table) when PAGED. ROW_SUMS_LAST: l_i is [BLOCK_M,
    # BLOCK_N], the probabilities' running sums by column, rescaled like acc and summed over the
    # row once after the loop: the row sum's reduction across the warps (three CTA barriers a
    # block in the sm_90 SASS of the 4-warp kernel) leaves the loop.
    n = start + tl.arange(0, BLOCK_N)
    if PAGED:
        phys = phys.to(tl.int64)
        if PAGE % BLOCK_N == 0:  # the whole block lies in one page
            off = (start % PAGE + tl.arange(0, BLOCK_N)).to(tl.int64)
        else:
            off = (n % PAGE).to(tl.int64)
        wrong = (phys < 0) | (phys >= nblocks)
        bad = bad | wrong
        phys = tl.where(wrong, 0, phys)  # read block 0 instead; the output becomes NaN
        krow = phys * sk0 + off * sk2
        vrow = phys * sv0 + off * sv2
    else:
        n64 = n.to(tl.int64)
        krow = n64 * sk2
        vrow = n64 * sv2
    kp = K + kb + krow[None, :] + d[:, None] * sk3  # k^T tile [BLOCK_D, BLOCK_N]
    vp = V + vb + vrow[:, None] + d[None, :] * sv3  # [BLOCK_N, BLOCK_D]
    if MASKED:
        kt = tl.load(kp, mask=(n < L)[None, :] & (d < D)[:, None], other=0.0)
        vt = tl.load(vp, mask=(n < L)[:, None] & (d < D)[None, :], other=0.0)
    elif EVEN_D:
        kt = tl.load(kp)
        vt = tl.load(vp)
    else:
        kt = tl.load(kp, mask=(d < D)[:, None], other=0.0)
        vt = tl.load(vp, mask=(d < D)[None, :], other=0.0)
    qk = tl.dot(q, kt, input_precision=PREC) * qk_scale
    if MASKED:
        vis = (n < L)[None, :]
        if CAUSAL:
            vis = vis & (n[None, :] <= lim[:, None])
        qk = tl.where(vis, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        # A row that has seen no key yet keeps m = -inf: shift by 0 so exp2 gives 0, not NaN.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        m_use = m_new
    p = tl.math.exp2(qk - m_use[:, None])
    # An unchanged maximum rescales by exactly 1 (exp2 is approximate: exp2(0) need not be 1), so
    # a block that adds nothing to a row leaves its sums bit for bit as they were.
    alpha = tl.where(m_new == m_i, 1.0, tl.math.exp2(m_i - m_use))
    if ROW_SUMS_LAST:
        l_i = l_i * alpha[:, None] + p
    else:
        l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision=PREC)
    return acc, m_new, l_i, bad
