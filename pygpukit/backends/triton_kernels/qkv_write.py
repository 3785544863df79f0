"""rmsnorm_qkv_rope_write: the attention block's first kernel at decode. The pre-norm block's
RMSNorm read into the qkv product (op rmsnorm_linear's GEMV, gemv_dense._gemv_sums), RoPE on q
and k, and the store of k and v into a contiguous KV cache, in one launch: the decode step's
separate cache write (kv_cache_write) goes away.

The product's columns are dealt to programs so that each program owns both elements of every
pair RoPE rotates: four columns a program, two pairs of one q or k head (neox: dims i and
i + D/2; gptj: 2i and 2i + 1), or four consecutive columns of a v head. A program rotates its
own results in registers and stores them where they belong: q rotated into the output, k
rotated and v as they are into the caches at the row's position. Nothing crosses programs, so
a row's results do not depend on the other rows.

Numerics, and bits: the float32 sums are rounded to x's dtype first, as the two-launch form's
qkv product stores them, then rotated in float32 with gp.rope's pinned rotation (rope.rotate_pair,
one rounding to the cache's dtype), so q and the cached k and v have the bits of
rmsnorm_linear followed by kv_cache_write. The rules of kv_cache_write hold: a position outside
the cache stores no k or v, a position outside the tables gives NaN in the rotated values.
Launched like the dense decode GEMV (programmatic dependent launch on sm_90+, the first weight
tile loaded before the wait inside constant_weights(); the row's position too, as
kv_write.PREFETCH_POSITIONS does).

Measured (H200, 2026-11-29; BENCHMARKS.md "The qkv product, RoPE and the cache write in one
launch"): alone it beats the two launches it replaces (8.4 us against 7.3 + 2.8 at the
Llama-3.2-1B shape, Nsight Compute), but inside the graph-replayed decode step, where both
forms are launched early, the step took longer: Llama-3.2-1B 798.7-798.9 us against 792.6 in
the same call; a build with the wait in this kernel instead of the GEMV body 802.8-803.6
against 797.3-799.5 there, and 4184.9-4186.0 against 4047.1-4060.7 us on the Llama-3.1-8B
shape. Loading the angles right after the wait or before it, capping the registers at the plain
GEMV's 40, or loading the position and angles by one lane a program measured slower still
(809-870 us, 4193-4521 us). So the engine keeps the two launches
(models/decode_forms.QKV_ROPE_WRITE off); the op serves callers who want the one launch (a
route naming rmsnorm_qkv_rope_write, or QKV_ROPE_WRITE on).
"""

# Triton kernel bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit.array import GPUArray
from pygpukit.backends._support.rows import as_rows
from pygpukit.backends._support.weights import weights_are_constant
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.gemv_dense import (
    BLOCK_N,
    _early,
    _gemv_sums,
    _norm_rows,
    _read_weight,
    tile,
)
from pygpukit.backends.triton_kernels.kv_write import PREFETCH_POSITIONS, _angles
from pygpukit.backends.triton_kernels.rope import rotate_pair
from pygpukit.creation import empty

__all__ = ["rmsnorm_qkv_rope_write"]


@triton.jit
def _qkv_rope_write(
    X, W, Bias, Q, G, R, H, P, COS, SIN, KC, VC, sxm, swn, srm, eps, S, NH, NKV, cap, max_pos,
    sc0, sc1, sc2, sc3, sd0, sd1, sd2, sd3, scr, scc, ssr, ssc,
    K: tl.constexpr, D: tl.constexpr, BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RES: tl.constexpr, GPTJ: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
    PREFETCH_POS: tl.constexpr,
):  # fmt: skip
    # Program (p, r): x row r = token j of sequence b. Programs p < n_rot take two rotated
    # pairs of the q and k heads (the columns in the order a0, b0, a1, b1: a pair's two
    # elements side by side), the others four columns of the v heads.
    HALF = D // 2
    p = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    b = row // S
    j = row - b * S
    if PREFETCH_POS:  # no kernel that may still run writes the positions (kv_write's rule)
        p0 = tl.load(P + b, cache_modifier=".cg")
    n_rot = (NH + NKV) * (HALF // 2)
    rotating = p < n_rot
    ar = tl.arange(0, 4)
    pair = p * 2 + ar // 2  # [4]: pairs over the q heads, then the k heads
    head = pair // HALF
    i = pair - head * HALF  # the pair's index in the tables
    if GPTJ:
        rcol = head * D + 2 * i + ar % 2
    else:
        rcol = head * D + i + (ar % 2) * HALF
    vcol = (NH + NKV) * D + (p - n_rot) * 4 + ar
    rn = tl.where(rotating, rcol, vcol)
    nok = rn < (NH + 2 * NKV) * D
    acc = _gemv_sums(X, W, Bias, rn, nok, row, sxm, swn, 0, G, R, H, srm, eps, K=K,
                     BLOCK_K=BLOCK_K, GATED=False, HAS_BIAS=HAS_BIAS, PDL=PDL,
                     PREFETCH=PREFETCH, NORM=True, HAS_RES=HAS_RES)  # fmt: skip
    if not PREFETCH_POS:
        p0 = tl.load(P + b)
    pos = (p0 + j).to(tl.int64)
    # The angles after the product: loaded beside it (after the wait, or before it) the step
    # measured slower (module docstring).
    c, s = _angles(COS, SIN, pos, i, max_pos, scr, scc, ssr, ssc, rotating, CT=tl.float32)
    # The product as the two-launch form's qkv array holds it, then the rotation in float32.
    y = acc.to(Q.dtype.element_ty).to(tl.float32)
    ya, yb = tl.split(tl.reshape(y, [2, 2]))
    ca, _c = tl.split(tl.reshape(c, [2, 2]))
    sa, _s = tl.split(tl.reshape(s, [2, 2]))
    ra, rb = rotate_pair(ya, yb, ca, sa)
    rot = tl.reshape(tl.join(ra, rb), [4])
    is_q = rotating & (head < NH)
    is_k = rotating & (head >= NH)
    ok = (pos >= 0) & (pos < cap)
    slot = tl.where(ok, pos, 0)
    tl.store(Q + row * (NH * D) + tl.where(is_q, rn, 0), rot.to(Q.dtype.element_ty), mask=is_q)
    hk = tl.where(is_k, head - NH, 0).to(tl.int64)
    dk = tl.where(is_k, rn - head * D, 0)
    kd = KC + b * sc0 + hk * sc1 + slot * sc2 + dk * sc3
    tl.store(kd, rot.to(KC.dtype.element_ty), mask=is_k & ok)
    vc = tl.where(rotating, 0, rn - (NH + NKV) * D)
    hv = (vc // D).to(tl.int64)
    vd = VC + b * sd0 + hv * sd1 + slot * sd2 + (vc - hv * D) * sd3
    tl.store(vd, y.to(VC.dtype.element_ty), mask=(p >= n_rot) & nok & ok)


def rmsnorm_qkv_rope_write(
    x: GPUArray,
    norm_weight: GPUArray,
    w: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    positions: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    *,
    num_heads: int,
    eps: float,
    rope_style: str = "neox",
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """q [B, S, H, D] rotated, k and v of the rows stored into the caches; (q, h) with a
    residual. x [B, S, K]; w [(H + 2 Hkv) D, K] (the q, k, v rows); the caches
    [B, Hkv, S_max, D]; cos/sin over the whole head (ops/qkv_write.py checks the arguments).
    ``out`` is the dispatcher's and must be None (the op takes no out=)."""
    if out is not None:
        raise ValueError("rmsnorm_qkv_rope_write returns a fresh q; it takes no out=")
    if k_cache._shape[3] % 4:  # the routing table's rule; never launched past it
        raise ValueError(
            f"rmsnorm_qkv_rope_write: the Triton kernel needs a head dim that is a multiple of "
            f"4, got {k_cache._shape[3]}"
        )
    batch, s, k = x._shape
    nkv, d = k_cache._shape[1], k_cache._shape[3]
    n = w._shape[0]
    w, copied = _read_weight(w)
    x, m, _, sx = as_rows(x)
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    g, r, sr, h = _norm_rows(norm_weight, residual, (batch, s), k, x)
    q = empty((batch, s, num_heads, d), x._dtype, x._device)
    if m:
        pdl, prefetch = _early(x, copied)
        # Four columns a program (two rotated pairs) at the RMSNorm GEMV's warps and K tile,
        # whatever columns its rule takes: Triton spreads a [columns, K tile] tile's warps
        # along K first, so each column's sum runs in the GEMV's order (its bits). At K 4096
        # the sm_90 TTGIR of both (two and four columns at 8 warps) has the one layout
        # threadsPerWarp [1, 32], warpsPerCTA [1, 8].
        _bn, warps, bk = tile(k, False, n, True)
        assert BLOCK_N == 4, "a program's four columns are two rotated pairs"
        launch(
            _qkv_rope_write, (n // 4, m),
            x, w, bias if bias is not None else q, q, g, r if r is not None else x,
            h if h is not None else q,
            positions, cos, sin, k_cache, v_cache, sx, w._estrides[0], sr, float(eps), s,
            num_heads, nkv, k_cache._shape[2], cos._shape[0], *k_cache.element_strides,
            *v_cache.element_strides, *cos.element_strides, *sin.element_strides,
            K=k, D=d, BLOCK_K=bk, HAS_BIAS=bias is not None, HAS_RES=h is not None,
            GPTJ=rope_style == "gptj", PDL=pdl, PREFETCH=prefetch,
            PREFETCH_POS=PREFETCH_POSITIONS and weights_are_constant(), launch_pdl=pdl,
            num_warps=warps,
        )  # fmt: skip
    return q if h is None else (q, h)
