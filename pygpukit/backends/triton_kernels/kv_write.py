"""kv_cache_write: store new k, v tokens into a contiguous or paged KV cache at positions read on
the device, with RoPE on k fused into the store (gp.rope's arithmetic and bits: float32,
float64 for float64 caches, the rounding pinned by rope.rotate_pair, one rounding to the
cache's dtype) and, when q is given, the same rotation of the step's queries in place (their
own programs of the launch: the decode step's separate RoPE launch on q goes away). With
q_norm / k_norm (Qwen3's RMSNorm of each head over head_dim before RoPE) the heads are
normalised in the same launch, with gp.rmsnorm's arithmetic (float32 statistics, the
normalised values rounded to the dtype) before they are rotated: the decode step's two
norm launches go away too. PDL_LAUNCH below (on) launches the write early on sm_90+
(programmatic dependent launch), to hide the launch gaps of the chain qkv GEMV -> write ->
attention. Cache layouts and the out-of-range rules:
pygpukit/ops/attention_decode.py. Routed through the attention_decode family, which re-exports
it.
"""

# Triton kernel bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from pygpukit.backends._support.weights import weights_are_constant
from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, next_pow2, rsqrt_rn
from pygpukit.backends.triton_kernels.driver import launch, pdl_enabled
from pygpukit.backends.triton_kernels.rope import rotate_pair

__all__ = ["kv_cache_write"]

# True: on sm_90+ (driver.pdl_enabled) the write is launched with programmatic dependent launch
# (its programs become resident while the kernel before it, the qkv projection, finishes, wait
# on it with gdc_wait before they read anything it may write, then release the next kernel's
# launch). H200, 2026-11-27, with attention launched early too (benchmarks/tuning/decode_ab.py
# --experiment pdl, one process): the graph-replayed batch-1 step 828 against 835-837 us plain
# (Llama-3.2-1B shape), 4195-4197 against 4208 us (Qwen3-8B shape), tokens identical
# (BENCHMARKS.md, "Decode end to end"). False: the plain launch.
PDL_LAUNCH = True
# True: inside the engine's forward (backends/_support/weights.constant_weights: the step's
# positions are written before it starts, never by the kernel ahead) each program loads its
# sequence's position before it waits, so the position's round trip overlaps the wait instead
# of following it. The result is the same either way. H100, 2026-11-27, with decode attention's
# PREFETCH_LENGTHS (benchmarks/tuning/decode_ab.py --experiment prefetch, one process, two
# rounds): the graph-replayed batch-1 step 1047.0-1047.9 against 1055.6-1056.9 us
# (Llama-3.2-1B shape), 5567.0-5568.2 against 5569.2-5570.1 us (Qwen3-8B), tokens identical.
PREFETCH_POSITIONS = True
# True: with PREFETCH_POSITIONS, inside constant_weights() (the rope tables and the head-norm
# weights are written before the engine's forward starts too, never by the kernel ahead) each
# program also loads the cos/sin of its position and its q_norm / k_norm weight before it
# waits, right after the position, so their round trips overlap the wait too. The same loads
# and arithmetic, only earlier: the same bits either way (the rotation's rounding is pinned,
# rope.rotate_pair, so moving the loads cannot change which product is fused). H200,
# 2026-11-29 (benchmarks/tuning/decode_ab.py --experiment early-loads, one process each, two
# rounds, with gemv_dense.NORM_WEIGHT_EARLY), a step in the 32-step graph: 778.4-778.5 against
# 781.6-782.0 us (Llama-3.2-1B shape), 4087.0-4090.2 against 4117.2-4118.0 us (Qwen3-8B),
# tokens identical.
ANGLES_EARLY = True


@triton.jit
def _rot_load(ptr, sd, hm, HALF, CT: tl.constexpr, GPTJ: tl.constexpr, BLOCK_H: tl.constexpr,
              BLOCK_HALF: tl.constexpr):  # fmt: skip
    """The two halves (xa, xb) of each rotated pair of a [BLOCK_H, D] head tile at ptr, in CT:
    gptj pairs (2i, 2i+1) from one contiguous row de-interleaved in registers, neox pairs
    (i, i + HALF)."""
    if GPTJ:
        jj = tl.arange(0, 2 * BLOCK_HALF)[None, :]
        x = tl.load(ptr + jj * sd, mask=hm & (jj < 2 * HALF), other=0.0).to(CT)
        xa, xb = tl.split(tl.reshape(x, [BLOCK_H, BLOCK_HALF, 2]))
    else:
        ia = tl.arange(0, BLOCK_HALF)[None, :]
        am = hm & (ia < HALF)
        xa = tl.load(ptr + ia * sd, mask=am, other=0.0).to(CT)
        xb = tl.load(ptr + (ia + HALF) * sd, mask=am, other=0.0).to(CT)
    return xa, xb


@triton.jit
def _norm_weights(W, HALF, keep, CT: tl.constexpr, GPTJ: tl.constexpr,
                  BLOCK_HALF: tl.constexpr):  # fmt: skip
    """The norm weight W [D] in the pairing of the rotated pairs (wa, wb [BLOCK_HALF]: gptj's
    de-interleaved in registers, neox's two halves), in CT; nothing is read where keep is
    false (a program that normalises another kind of head)."""
    if GPTJ:
        jj = tl.arange(0, 2 * BLOCK_HALF)
        w = tl.load(W + jj, mask=(jj < 2 * HALF) & keep, other=0.0).to(CT)
        wa, wb = tl.split(tl.reshape(w, [BLOCK_HALF, 2]))
    else:
        ia = tl.arange(0, BLOCK_HALF)
        wm = (ia < HALF) & keep
        wa = tl.load(W + ia, mask=wm, other=0.0).to(CT)
        wb = tl.load(W + ia + HALF, mask=wm, other=0.0).to(CT)
    return wa, wb


@triton.jit
def _norm_pairs(xa, xb, W, w, eps, HALF, DT: tl.constexpr, CT: tl.constexpr, GPTJ: tl.constexpr,
                BLOCK_HALF: tl.constexpr):  # fmt: skip
    """RMSNorm of each head row (xa, xb: the two halves of its rotated pairs, the whole head:
    rotary_dim == head_dim) with the weight W [D] taken in the same pairing (w: the pair
    (wa, wb) _norm_weights loaded already, or None: loaded here), rounded to DT as gp.rmsnorm
    stores it, back in CT for the rotation."""
    ss = tl.sum(xa * xa, axis=1) + tl.sum(xb * xb, axis=1)
    rstd = rsqrt_rn(ss / (2 * HALF) + eps)[:, None]
    if w is None:
        w = _norm_weights(W, HALF, True, CT=CT, GPTJ=GPTJ, BLOCK_HALF=BLOCK_HALF)
    wa, wb = w
    xa = (xa * rstd * wa[None, :]).to(DT).to(CT)
    xb = (xb * rstd * wb[None, :]).to(DT).to(CT)
    return xa, xb


@triton.jit
def _rot_store(ptr, sd, xa, xb, c, s, mask, HALF, GPTJ: tl.constexpr, BLOCK_H: tl.constexpr,
               BLOCK_HALF: tl.constexpr):  # fmt: skip
    """Rotate the pairs by (c, s) [1, BLOCK_HALF] and store them (masked rows: ``mask``
    [BLOCK_H, 1]) at ptr, rounded once to ptr's dtype (rope.rotate_pair: gp.rope's bits)."""
    ra, rb = rotate_pair(xa, xb, c, s)
    if GPTJ:
        jj = tl.arange(0, 2 * BLOCK_HALF)[None, :]
        r = tl.reshape(tl.join(ra, rb), [BLOCK_H, 2 * BLOCK_HALF])
        tl.store(ptr + jj * sd, r.to(ptr.dtype.element_ty), mask=mask & (jj < 2 * HALF))
    else:
        ia = tl.arange(0, BLOCK_HALF)[None, :]
        am = mask & (ia < HALF)
        tl.store(ptr + ia * sd, ra.to(ptr.dtype.element_ty), mask=am)
        tl.store(ptr + (ia + HALF) * sd, rb.to(ptr.dtype.element_ty), mask=am)


@triton.jit
def _angles(COS, SIN, pos, i, max_pos, scr, scc, ssr, ssc, mask, CT: tl.constexpr):
    """cos and sin of the pairs i at positions pos (broadcast against i), in CT; NaN for a
    position outside the tables (negative included), as gp.rope gives."""
    valid = (pos >= 0) & (pos < max_pos)
    row = tl.where(valid, pos, 0)
    c = tl.load(COS + row * scr + i * scc, mask=mask, other=0.0).to(CT)
    s = tl.load(SIN + row * ssr + i * ssc, mask=mask, other=0.0).to(CT)
    return tl.where(valid, c, float("nan")), tl.where(valid, s, float("nan"))


@triton.jit
def _rotate_q(
    Q, QN, eps, b, j, blk, Hq, HALF, sq0, sq1, sq2, sq3, angles, w, CT: tl.constexpr,
    GPTJ: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, Q_NORM: tl.constexpr,
):  # fmt: skip
    """Rotate q heads blk*BLOCK_H.. of token j of sequence b in place by ``angles`` (cos, sin
    [BLOCK_HALF] at the token's position, _angles': NaN outside the tables, as gp.rope gives),
    normalised first with Q_NORM (w: the q_norm weight's pair, _norm_weights', or None: loaded
    here)."""
    hs = blk * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = (hs < Hq)[:, None]
    qs = Q + b.to(tl.int64) * sq0 + hs.to(tl.int64)[:, None] * sq1 + j.to(tl.int64) * sq2
    xa, xb = _rot_load(qs, sq3, hm, HALF, CT=CT, GPTJ=GPTJ, BLOCK_H=BLOCK_H,
                       BLOCK_HALF=BLOCK_HALF)  # fmt: skip
    if Q_NORM:
        xa, xb = _norm_pairs(xa, xb, QN, w, eps, HALF, DT=Q.dtype.element_ty, CT=CT,
                             GPTJ=GPTJ, BLOCK_HALF=BLOCK_HALF)  # fmt: skip
    c, s = angles
    _rot_store(qs, sq3, xa, xb, c[None, :], s[None, :], hm, HALF, GPTJ=GPTJ, BLOCK_H=BLOCK_H,
               BLOCK_HALF=BLOCK_HALF)  # fmt: skip


@triton.jit
def _rope_rows(ptr, sd, rmask, pos, COS, SIN, NW, eps, D, HALF, max_pos, scr, scc, ssr, ssc,
               CT: tl.constexpr, ROPE: tl.constexpr, GPTJ: tl.constexpr, NORM: tl.constexpr,
               BLOCK_D: tl.constexpr):  # fmt: skip
    """Head rows [R, BLOCK_D] at ptr ([R, 1] row bases, element stride sd; rmask [R, 1]) in CT,
    each RMS-normalised with the weight NW first (NORM: whole-head RoPE only, as
    kv_cache_write's norms) and rotated at its own position pos [R] (ROPE), unrounded: the
    values kv_cache_write rounds once into the cache or q. Each element is rotated with its pair
    partner (neox: i +- HALF, gptj: i ^ 1) loaded as a second tile, so the rows keep their
    [R, D] layout for tl.dot; dims past 2 * HALF pass through. A position outside the tables
    gives NaN in the rotated dims, as gp.rope does."""
    dd = tl.arange(0, BLOCK_D)[None, :]
    dm = rmask & (dd < D)
    x = tl.load(ptr + dd * sd, mask=dm, other=0.0).to(CT)
    if ROPE:
        rot = dd < 2 * HALF
        if GPTJ:
            pd = dd ^ 1
            ci = dd // 2
            first = (dd % 2) == 0
        else:
            first = dd < HALF
            pd = tl.where(first, dd + HALF, dd - HALF)
            ci = tl.where(first, dd, dd - HALF)
        xp = tl.load(ptr + pd * sd, mask=dm & rot, other=0.0).to(CT)
        if NORM:  # rmsnorm over the head, rounded to the dtype (kv_write's _norm_pairs)
            rstd = rsqrt_rn(tl.sum(x * x, axis=1) / D + eps)[:, None]
            w = tl.load(NW + dd, mask=dd < D, other=0.0).to(CT)
            wp = tl.load(NW + pd, mask=rot, other=0.0).to(CT)
            x = (x * rstd * w).to(ptr.dtype.element_ty).to(CT)
            xp = (xp * rstd * wp).to(ptr.dtype.element_ty).to(CT)
        # The angles inline, not through _angles: each element loads its own pair's angle
        # ([R, BLOCK_D], not _angles' [BLOCK_HALF] row), and the append kernel's schedule was
        # measured with this form (its bits do not depend on it: rotate_pair pins them).
        valid = ((pos >= 0) & (pos < max_pos))[:, None]
        row = tl.where(valid, pos[:, None], 0)
        c = tl.load(COS + row * scr + ci * scc, mask=rot, other=0.0).to(CT)
        s = tl.load(SIN + row * ssr + ci * ssc, mask=rot, other=0.0).to(CT)
        c = tl.where(valid, c, float("nan"))
        s = tl.where(valid, s, float("nan"))
        # The first element of a pair is xa c - xb s, the second xb c + xa s: each is x c + xp
        # (-s or s), rotate_pair's second output with the sine's sign set per element (an exact
        # negation), so the same product is fused and rounded as in _rot_store: its bits.
        _xp, r = rotate_pair(xp, x, c, tl.where(first, s * -1.0, s))
        x = tl.where(rot, r, x)
    return x


@triton.jit
def _append_tokens(
    KC, VC, K, V, BT, COS, SIN, KN, eps, b, hk, L, lo, top, Sq, D, HALF, cap, nblocks, max_pos,
    sc0, sc1, sc2, sc3, sd0, sd1, sd2, sd3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, sbt0, sbt1,
    scr, scc, ssr, ssc,
    PAGED: tl.constexpr, PAGE: tl.constexpr, ROPE: tl.constexpr, GPTJ: tl.constexpr,
    K_NORM: tl.constexpr, CT: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Write the new tokens of kv head hk of sequence b (k, v [B, Hkv, Sq, D]; token j goes to
    cache position L - Sq + j) that fall in this program's keys [lo, top), as kv_cache_write
    writes them (k normalised and rotated, rounded once); tokens BLOCK_T at a time, a fixed
    tile shape whatever Sq, so a token's arithmetic never depends on the others. Positions
    outside the cache, and pages outside it, are skipped, as kv_cache_write skips them."""
    dd = tl.arange(0, BLOCK_D)[None, :]
    dm = dd < D
    for t0 in range(0, Sq, BLOCK_T):
        j = t0 + tl.arange(0, BLOCK_T)
        pos = L - Sq + j
        ok = (j < Sq) & (pos >= lo) & (pos < top) & (pos >= 0) & (pos < cap)
        pos = tl.where(ok, pos, 0).to(tl.int64)
        j64 = j.to(tl.int64)[:, None]
        kp = K + b.to(tl.int64) * sk0 + hk.to(tl.int64) * sk1 + j64 * sk2
        vp = V + b.to(tl.int64) * sv0 + hk.to(tl.int64) * sv1 + j64 * sv2
        vt = tl.load(vp + dd * sv3, mask=ok[:, None] & dm)
        kt = _rope_rows(kp, sk3, ok[:, None], pos, COS, SIN, KN, eps, D, HALF, max_pos, scr,
                        scc, ssr, ssc, CT=CT, ROPE=ROPE, GPTJ=GPTJ, NORM=K_NORM,
                        BLOCK_D=BLOCK_D)  # fmt: skip
        if PAGED:
            phys = tl.load(BT + b.to(tl.int64) * sbt0 + (pos // PAGE) * sbt1, mask=ok, other=0)
            phys = phys.to(tl.int64)
            ok = ok & (phys >= 0) & (phys < nblocks)
            phys = tl.where(ok, phys, 0)
            slot = pos % PAGE
            kd = KC + phys * sc0 + hk.to(tl.int64) * sc1 + slot * sc2
            vd = VC + phys * sd0 + hk.to(tl.int64) * sd1 + slot * sd2
        else:
            kd = KC + b.to(tl.int64) * sc0 + hk.to(tl.int64) * sc1 + pos * sc2
            vd = VC + b.to(tl.int64) * sd0 + hk.to(tl.int64) * sd1 + pos * sd2
        wm = ok[:, None] & dm
        tl.store(vd[:, None] + dd * sd3, vt, mask=wm)
        tl.store(kd[:, None] + dd * sc3, kt.to(KC.dtype.element_ty), mask=wm)


@triton.jit
def _kv_write(
    KC, VC, K, V, P, BT, COS, SIN, Q, QN, KN, eps, Hkv, Hq, NKB, Sq, D, HALF, cap, nblocks,
    max_pos,
    sc0, sc1, sc2, sc3, sd0, sd1, sd2, sd3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3,
    sq0, sq1, sq2, sq3, sbt0, sbt1, scr, scc, ssr, ssc,
    PAGED: tl.constexpr, PAGE: tl.constexpr, ROPE: tl.constexpr, GPTJ: tl.constexpr,
    TAIL: tl.constexpr, CT: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_HALF: tl.constexpr, HAS_Q: tl.constexpr, BLOCK_HQ: tl.constexpr,
    Q_NORM: tl.constexpr, K_NORM: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
    EARLY_ANGLES: tl.constexpr,
):  # fmt: skip
    # One program per new token and block of heads: [BLOCK_H, BLOCK_D] tiles. Programs 0..NKB-1
    # of axis 1 write blocks of kv heads; with q (HAS_Q, ROPE only) the programs after them
    # rotate blocks of BLOCK_HQ q heads in place at the same position. RoPE runs in CT (float32,
    # float64 for float64 caches) with gp.rope's pinned rounding (rope.rotate_pair) and rounds
    # once to the dtype, as gp.rope does.
    tok = tl.program_id(0)
    b = tok // Sq
    j = tok - b * Sq
    q_w, k_w = None, None  # None: the norm weights are loaded where they are used
    if PREFETCH:  # no kernel that may still run writes the positions (PREFETCH_POSITIONS);
        p0 = tl.load(P + b, cache_modifier=".cg")  # read at L2, where the writes are
        if EARLY_ANGLES:  # ANGLES_EARLY (ROPE): the tables and norm weights are constant too
            i = tl.arange(0, BLOCK_HALF)
            angles = _angles(COS, SIN, (p0 + j).to(tl.int64), i, max_pos, scr, scc, ssr, ssc,
                             i < HALF, CT=CT)  # fmt: skip
            if Q_NORM:
                q_w = _norm_weights(QN, HALF, tl.program_id(1) >= NKB, CT=CT, GPTJ=GPTJ,
                                    BLOCK_HALF=BLOCK_HALF)  # fmt: skip
            if K_NORM:
                k_w = _norm_weights(KN, HALF, tl.program_id(1) < NKB, CT=CT, GPTJ=GPTJ,
                                    BLOCK_HALF=BLOCK_HALF)  # fmt: skip
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    if not PREFETCH:
        p0 = tl.load(P + b)
    dd = tl.arange(0, BLOCK_D)[None, :]
    pos = (p0 + j).to(tl.int64)
    if not ROPE:  # no rotation, no q programs: the q branch below compiles and is dropped
        angles = (0.0, 0.0)
    elif not EARLY_ANGLES:  # after the wait; one load for both kinds of program
        i = tl.arange(0, BLOCK_HALF)
        angles = _angles(COS, SIN, pos, i, max_pos, scr, scc, ssr, ssc, i < HALF, CT=CT)
    if HAS_Q:
        is_q = tl.program_id(1) >= NKB
    else:
        is_q = False  # a launch without q compiles the kv programs alone
    if is_q:
        _rotate_q(Q, QN, eps, b, j, tl.program_id(1) - NKB, Hq, HALF, sq0, sq1, sq2, sq3,
                  angles, q_w, CT=CT, GPTJ=GPTJ, BLOCK_H=BLOCK_HQ, BLOCK_HALF=BLOCK_HALF,
                  Q_NORM=Q_NORM)  # fmt: skip
    else:
        hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
        hm = (hs < Hkv)[:, None]
        h64 = hs.to(tl.int64)[:, None]
        dm = hm & (dd < D)
        ks = K + b.to(tl.int64) * sk0 + h64 * sk1 + j.to(tl.int64) * sk2
        vs = V + b.to(tl.int64) * sv0 + h64 * sv1 + j.to(tl.int64) * sv2
        # The token's values first: their loads do not depend on the position.
        vt = tl.load(vs + dd * sv3, mask=dm)
        if ROPE:
            xa, xb = _rot_load(ks, sk3, hm, HALF, CT=CT, GPTJ=GPTJ, BLOCK_H=BLOCK_H,
                               BLOCK_HALF=BLOCK_HALF)  # fmt: skip
            if K_NORM:
                xa, xb = _norm_pairs(xa, xb, KN, k_w, eps, HALF, DT=K.dtype.element_ty, CT=CT,
                                     GPTJ=GPTJ, BLOCK_HALF=BLOCK_HALF)  # fmt: skip
            if TAIL:  # dims past rotary_dim pass through
                tm = dm & (dd >= 2 * HALF)
                kt = tl.load(ks + dd * sk3, mask=tm)
        else:
            kt = tl.load(ks + dd * sk3, mask=dm)
        ok = (pos >= 0) & (pos < cap)
        pos = tl.where(ok, pos, 0)
        if PAGED:
            phys = tl.load(BT + b.to(tl.int64) * sbt0 + (pos // PAGE) * sbt1).to(tl.int64)
            ok = ok & (phys >= 0) & (phys < nblocks)
            phys = tl.where(ok, phys, 0)
            slot = pos % PAGE
            kd = KC + phys * sc0 + h64 * sc1 + slot * sc2
            vd = VC + phys * sd0 + h64 * sd1 + slot * sd2
        else:
            kd = KC + b.to(tl.int64) * sc0 + h64 * sc1 + pos * sc2
            vd = VC + b.to(tl.int64) * sd0 + h64 * sd1 + pos * sd2
        tl.store(vd + dd * sd3, vt, mask=dm & ok)
        if ROPE:
            # _angles' rule at the unclamped position: where ok stores (0 <= pos < cap), NaN
            # from max_pos on
            c, s = angles
            _rot_store(kd, sc3, xa, xb, c[None, :], s[None, :], hm & ok, HALF, GPTJ=GPTJ,
                       BLOCK_H=BLOCK_H, BLOCK_HALF=BLOCK_HALF)  # fmt: skip
            if TAIL:
                tl.store(kd + dd * sc3, kt, mask=tm & ok)
        else:
            tl.store(kd + dd * sc3, kt, mask=dm & ok)


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
    are given; q [B, H, Sq, D] rotated in place at the same positions when given; k and q
    RMS-normalised per head first with k_norm / q_norm [D] and norm_eps; qk_norm is the routing
    table's mark of such a call), in place; returns None. ``out`` is the dispatcher's and must
    be None."""
    if out is not None:
        raise ValueError("kv_cache_write writes the caches in place; it takes no out=")
    batch, hkv, sq, d = k.shape
    if batch * hkv * sq * d == 0:
        return
    rope = cos is not None and sin is not None
    half = cos.shape[1] if cos is not None else 0
    bd = next_pow2(d)
    bhalf = next_pow2(half) if rope else 1
    bh = min(next_pow2(hkv), max(1, 4096 // bd))
    nkb = cdiv(hkv, bh)
    hq = q.shape[1] if q is not None and rope else 0
    bhq = min(next_pow2(hq), max(1, 4096 // bd)) if hq else 1
    paged = block_table is not None
    cap = k_cache.shape[2] * (block_table.shape[1] if block_table is not None else 1)
    sbt = tuple(block_table.element_strides) if block_table is not None else (0, 0)
    tc = tuple(cos.element_strides) if cos is not None else (0, 0)
    ts = tuple(sin.element_strides) if sin is not None else (0, 0)
    sq_ = tuple(q.element_strides) if q is not None and hq else (0, 0, 0, 0)
    qn = q_norm.contiguous() if q_norm is not None and hq else None
    kn = k_norm.contiguous() if k_norm is not None and rope else None
    pdl = PDL_LAUNCH and pdl_enabled(k.device)
    # Not tied to pdl: without the early launch it only moves a load, and so the interpreter
    # runs this path too.
    prefetch = PREFETCH_POSITIONS and weights_are_constant()
    # A norm weight copied just now (a strided view) is the kernel ahead: read after the wait.
    in_place = (qn is None or qn is q_norm) and (kn is None or kn is k_norm)
    early = prefetch and ANGLES_EARLY and rope and in_place
    launch(
        _kv_write, (batch * sq, nkb + cdiv(hq, bhq)),
        k_cache, v_cache, k, v, positions, block_table if paged else positions,
        cos if rope else k, sin if rope else k, q if hq else k, qn if qn is not None else k,
        kn if kn is not None else k, float(norm_eps), hkv, hq, nkb, sq, d, half, cap,
        k_cache.shape[0], cos.shape[0] if cos is not None else 0,
        *k_cache.element_strides, *v_cache.element_strides, *k.element_strides,
        *v.element_strides, *sq_, *sbt, *tc, *ts,
        PAGED=paged, PAGE=k_cache.shape[2] if paged else 1, ROPE=rope,
        GPTJ=rope_style == "gptj", TAIL=rope and 2 * half < d,
        CT=tl.float64 if k.dtype.name == "float64" else tl.float32, BLOCK_H=bh, BLOCK_D=bd,
        BLOCK_HALF=bhalf, HAS_Q=hq > 0, BLOCK_HQ=bhq, Q_NORM=qn is not None,
        K_NORM=kn is not None, PDL=pdl, PREFETCH=prefetch, EARLY_ANGLES=early, launch_pdl=pdl,
        num_warps=4,
    )  # fmt: skip
