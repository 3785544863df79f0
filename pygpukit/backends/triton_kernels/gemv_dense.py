"""The dense decode GEMV in Triton: y = x @ W^T + bias for a few rows of x (op linear_gemv, the
one row gp.linear hands it at decode; also the twin of the native op gemv), its gated twin
y = silu(x @ Wg^T) * (x @ Wu^T) over the stacked [Wg; Wu] weight of a gated MLP (op
linear_silu_mul), and y = rmsnorm(x + r) @ W^T + bias with the norm read in (op
rmsnorm_linear: the program reads the whole row anyway, sums its squares beside the products
of x * norm_weight and scales the float32 sums by the norm's 1 / rms at the end; one program of
the row stores h = x + r). W is [N, K] in x's dtype (float16 or bfloat16).

Numerics: products and sums in float32 (each program adds its K tiles in a fixed order, a tile
by a tree of fixed shape), bias added in float32, one rounding at the store; the gated form
applies silu(g) * u to the two float32 sums and rounds once. The result of a row does not
depend on the other rows (one program per row and column block).

Why it exists beside cuBLASLt: at decode a product reads W once and does almost nothing else,
so what separates it from the copy rate is the start and end of the launch. On sm_90+ it is
launched with programmatic dependent launch and releases the next kernel's launch at once
(``gdc_launch_dependents``); it waits on the previous kernel (``gdc_wait``) before it reads
anything. Inside ``constant_weights()`` (pygpukit/backends/_support/weights.py: the LLM engine's
forward, whose weights no kernel writes) each program loads its first weight tile (and the
RMSNorm form its norm weight, NORM_WEIGHT_EARLY) before the wait, so the weight stream of one
product overlaps the tail of the one before (early_tile: all but a plain square product from
K 4096); x, the bias and y are touched only after the wait in every case. Measured against
cuBLASLt in BENCHMARKS.md ("Batch-1 decode").
"""

# Triton kernel bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver
from pygpukit.backends._support.rows import as_rows, out_rows
from pygpukit.backends._support.weights import weights_are_constant
from pygpukit.backends.triton_kernels._common import cdiv, next_pow2, rsqrt_rn
from pygpukit.backends.triton_kernels.driver import launch, pdl_enabled
from pygpukit.creation import empty

__all__ = ["gemv", "linear_gemv", "linear_silu_mul", "rmsnorm_linear"]

# Tiles from graph-replayed chains of 16 GEMVs on an H200 (2026-11-26):
# 4 output columns a program beat 8 and 16 at N 2048 (3.7 vs 4.2 / 4.5 us), N 3072 (4.3-4.6 vs
# 4.7-4.9 / 5.0) and the gated N 2 x 8192 (16.3 us at 2 warps, 97% of the copy rate, vs 17.8-19.0).
BLOCK_N = 4  # output columns per program
MAX_BLOCK_K = 1024  # a [4, 1024] tile of 16-bit weights: 32 values a thread at 4 warps
NUM_WARPS = 4
GATED_NUM_WARPS = 2  # two tiles (gate and up) a step
# From K = WIDE_K on, tiles of [4, 2048] at twice the warps (the values a thread holds per tile
# unchanged, twice the bytes in flight a program). H100 (benchmarks/tuning/tune_gemv.py,
# 2026-11-27, graph-replayed chains, % of the 3033 GB/s copy rate): 2048x8192 13.76 -> 12.36
# us (80 -> 90%), 4096x12288 38.59 -> 34.26 us (86 -> 97%), 4096x4096 12.92 -> 12.19,
# 6144x4096 18.78 -> 17.67, gated 2 x 12288 x 4096 66.39 -> 64.44 us.
WIDE_K = 4096
WIDE_BLOCK_K = 2048
# The RMSNorm-read form (rmsnorm_linear) takes the whole row as one tile up to K = NORM_FULL_K
# (columns and warps: NORM_TILE_WEIGHTS below): its first tile, streamed before the wait, is
# then the program's whole weight slice. With 4 columns at K / 256 warps, in the model
# (benchmarks/tuning/decode_ab.py --experiment sites, H200, 2026-11-27, one process, two
# rounds) the qkv product after the
# previous layer's down projection gained: graph step 815.4-815.5 against 825.8-828.8 us
# (Llama-3.2-1B shape, K 2048), 4177.0-4179.7 against 4192.8-4194.1 us (Qwen3-8B shape, K
# 4096); on the lm_head within 0.5% either way. The plain product after decode attention
# (output projection) did not gain (827.0-827.3 us; Qwen3-8B 4231-4233, lost).
NORM_FULL_K = 4096
# Such a program reads at most NORM_TILE_WEIGHTS weights (16 KB of bfloat16: fewer output
# columns at a longer row, at most BLOCK_N, so below K 2048 fewer weights) at K / 512 warps (at
# least NUM_WARPS: 64 values a thread at K 2048, 32 at 4096).
# H200, 2026-11-29 (decode_ab.py --experiment sites, one process each, two rounds, a step in
# the 32-step graph) against the earlier rule (4 columns at K / 256 warps, 32 values a thread):
# the qkv product alone at (2, 8, 4096) 4070.5-4072.4 against 4087.6-4092.0 us (Qwen3-8B
# shape, K 4096; (4, 8, 2048) 4090.7-4094.5), at (4, 4, 2048) 775.3-775.7 against 778.2-778.4
# (Llama-3.2-1B, K 2048; (2, 8, 2048) 788.0-788.1, (8, 8, 2048) 778.6-779.1). The rule at the
# qkv product and the lm_head, another machine: 770.2-770.3 against 773.4-773.5 us, 4050.9-4052.5
# against 4075.1-4075.2 us (the lm_head alone level: 770.0-770.4, 4050.9-4052.3).
NORM_TILE_WEIGHTS = 8192
# Inside constant_weights(), launched early, the RMSNorm form's programs load the norm weight
# (the first tile's) before the wait, beside the first weight tile: a model constant that the
# weights streamed since its last use have evicted from L2, whose DRAM round trip otherwise
# follows the wait. The values are the same either way. H200, 2026-11-29 (benchmarks/tuning/
# decode_ab.py --experiment early-loads, one process each, two rounds): a step in the 32-step
# graph 785.9-786.0 against 792.3-792.6 us (Llama-3.2-1B shape), 4105.4-4105.6 against
# 4128.9-4129.3 (Qwen3-8B), tokens identical. Not where the norm weight was copied first (a
# strided view): the copy is then the kernel just before.
NORM_WEIGHT_EARLY = True


# From this K on, a plain square product (the 8B shapes' output projection) loads no weight
# tile before its wait (early_tile).
NO_EARLY_SQUARE_K = 4096


def early_tile(n: int, k: int, gated: bool, norm: bool = False) -> bool:
    """Whether the programs of a product (n output columns, the gated form's per half; in
    features k; norm: the RMSNorm-read form) load their first weight tile (and the norm
    weight) before the wait inside constant_weights(): every product but a plain square one
    from K = NO_EARLY_SQUARE_K on. The shape stands in for the output projection of the
    8B shapes, the product after decode attention, which the GEMV cannot see; it was measured
    at 4096 x 4096 and batch 1 only. H200, 2026-11-29 (benchmarks/tuning/decode_ab.py
    --experiment early-tile, one process, two rounds, a step in the 32-step graph, tokens
    identical; BENCHMARKS.md "Batch 1: how much to load before the wait"): without the output
    projection's early tile, Llama-3.1-8B 3958.6-3960.6 against 3975.2-3975.5 us, Qwen3-8B
    4038.0-4041.0 against 4051.4-4051.8 (and 4047.4-4051.4 against 4058.0-4059.4, another
    machine), but Llama-3.2-1B (K 2048) 786.0-786.2 against 774.6-775.0. Without the early
    tile at the qkv, gate/up or down product the step took 5-42 us longer on the Llama-3.2-1B
    and Qwen3-8B shapes; two or three K tiles before the wait (a build since removed) 58-277
    us longer."""
    return gated or norm or n != k or k < NO_EARLY_SQUARE_K


def tile(k: int, gated: bool, n: int = 0, norm: bool = False) -> tuple[int, int, int]:
    """(output columns a program, warps, K tile) for a product of in_features k and n output
    columns, norm: the rmsnorm_linear form (benchmarks/tuning/tune_gemv.py sweeps them in
    isolation; benchmarks/tuning/decode_ab.py --experiment sites per product of a model's
    step). The rule depends on k and the form; n identifies the product for those sweeps."""
    if norm and k <= NORM_FULL_K:
        bk = next_pow2(k)
        return min(BLOCK_N, max(1, NORM_TILE_WEIGHTS // bk)), max(NUM_WARPS, bk // 512), bk
    warps = GATED_NUM_WARPS if gated else NUM_WARPS
    if k >= WIDE_K:
        return BLOCK_N, 2 * warps, WIDE_BLOCK_K
    return BLOCK_N, warps, min(MAX_BLOCK_K, next_pow2(k))


@triton.jit
def _x_tile(xp, rp, hp, gp, ks, km, store_h, g0, NORM: tl.constexpr, HAS_RES: tl.constexpr,
            HAS_G0: tl.constexpr):  # fmt: skip
    """One K tile of the row x enters the product: as it is, or (NORM) as x * g with its sum of
    squares for the norm's scale (g loaded here, or g0 with HAS_G0: loaded before the wait);
    with HAS_RES x is first h = x + r, rounded to x's dtype as the residual stream keeps it
    (stored by one program of the row)."""
    x = tl.load(xp + ks, mask=km, other=0.0)
    if HAS_RES:
        x = (x.to(tl.float32) + tl.load(rp + ks, mask=km, other=0.0).to(tl.float32)).to(x.dtype)
        tl.store(hp + ks, x, mask=km & store_h)
    x = x.to(tl.float32)
    if NORM:
        ss = tl.sum(x * x, axis=0)
        if HAS_G0:
            x = x * g0.to(tl.float32)
        else:
            x = x * tl.load(gp + ks, mask=km, other=0.0).to(tl.float32)
    else:
        ss = 0.0
    return x[None, :], ss


@triton.jit
def _gemv_sums(
    X, W, Bias, rn, nok, row, sxm, swn, up, G, R, H, srm, eps,
    K: tl.constexpr, BLOCK_K: tl.constexpr, GATED: tl.constexpr, HAS_BIAS: tl.constexpr,
    PDL: tl.constexpr, PREFETCH: tl.constexpr, NORM: tl.constexpr, HAS_RES: tl.constexpr,
    G_EARLY: tl.constexpr = False,
):  # fmt: skip
    """The float32 results of output columns rn (a BLOCK_N vector, any columns; nok masks them)
    of x row ``row``: bias added, the norm's scale and the gated silu(g) * u applied, before
    the store's rounding. K is a constexpr: the K tiles are unrolled, so every tile's loads
    are issued ahead of the math. With GATED it also reads the up rows (``up`` elements further
    down W) of the same columns. With NORM the row is RMS-normalised on the way in (G the norm's
    weight): every program reads the whole row anyway, so it sums x * x beside the products of
    x * g and scales its sums by 1 / sqrt(mean(x^2) + eps) at the end; no kernel writes the
    normalised row. Program 0 of axis 0 stores the row's h = x + r (HAS_RES)."""
    EARLY_G: tl.constexpr = PREFETCH and NORM and G_EARLY  # the norm weight before the wait
    rk = tl.arange(0, BLOCK_K)
    wp = W + tl.where(nok, rn, 0).to(tl.int64)[:, None] * swn + rk[None, :]
    kok = rk[None, :] < K
    if PREFETCH:  # constant weights: the first tile in flight during the previous kernel's tail
        w0 = tl.load(wp, mask=kok, other=0.0)
        if GATED:
            u0 = tl.load(wp + up, mask=kok, other=0.0)
        if EARLY_G:
            g0 = tl.load(G + rk, mask=rk < K, other=0.0)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    if not PREFETCH:
        w0 = tl.load(wp, mask=kok, other=0.0)
        if GATED:
            u0 = tl.load(wp + up, mask=kok, other=0.0)
    xp = X + row * sxm
    rp = R + row * srm
    hp = H + row * K  # h is contiguous [M, K]
    first = tl.program_id(0) == 0
    if not EARLY_G:
        g0 = 0.0  # a name for the compiler: _x_tile loads g itself
    x, ss = _x_tile(xp, rp, hp, G, rk, rk < K, first, g0, NORM, HAS_RES, HAS_G0=EARLY_G)
    acc = tl.sum(w0.to(tl.float32) * x, axis=1)
    if GATED:
        acu = tl.sum(u0.to(tl.float32) * x, axis=1)
    for k0 in tl.static_range(BLOCK_K, K, BLOCK_K):
        ks = k0 + rk
        km = ks < K
        w = tl.load(wp + k0, mask=km[None, :], other=0.0)
        x, s = _x_tile(xp, rp, hp, G, ks, km, first, 0.0, NORM, HAS_RES, HAS_G0=False)
        ss += s
        acc += tl.sum(w.to(tl.float32) * x, axis=1)
        if GATED:
            u = tl.load(wp + up + k0, mask=km[None, :], other=0.0)
            acu += tl.sum(u.to(tl.float32) * x, axis=1)
    if NORM:
        rstd = rsqrt_rn(ss / K + eps)
        acc = acc * rstd
        if GATED:
            acu = acu * rstd
    if HAS_BIAS:
        acc += tl.load(Bias + rn, mask=nok, other=0.0).to(tl.float32)
    if GATED:
        acc = acc / (1.0 + tl.exp(-acc)) * acu
    return acc


@triton.jit
def _gemv(
    X, W, Bias, Y, M, N, sxm, swn, sym, up, G, R, H, srm, eps,
    K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GATED: tl.constexpr,
    HAS_BIAS: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr, NORM: tl.constexpr,
    HAS_RES: tl.constexpr, G_EARLY: tl.constexpr,
):  # fmt: skip
    # Program (i, r): output columns i*BLOCK_N.. of x row r.
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row = tl.program_id(1).to(tl.int64)
    nok = rn < N
    acc = _gemv_sums(X, W, Bias, rn, nok, row, sxm, swn, up, G, R, H, srm, eps, K=K,
                     BLOCK_K=BLOCK_K, GATED=GATED, HAS_BIAS=HAS_BIAS, PDL=PDL,
                     PREFETCH=PREFETCH, NORM=NORM, HAS_RES=HAS_RES, G_EARLY=G_EARLY)  # fmt: skip
    tl.store(Y + row * sym + rn, acc.to(Y.dtype.element_ty), mask=nok)


@triton.jit
def _gemv_kernel(
    X, W, Bias, Y, M, N, sxm, swn, sym, up,
    K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GATED: tl.constexpr,
    HAS_BIAS: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
):  # fmt: skip
    # The plain product, with the launch arguments it always had (the host cost of a launch
    # grows with their count, and eager decode launches this one most).
    _gemv(X, W, Bias, Y, M, N, sxm, swn, sym, up, Y, Y, Y, 0, 0.0, K=K, BLOCK_N=BLOCK_N,
          BLOCK_K=BLOCK_K, GATED=GATED, HAS_BIAS=HAS_BIAS, PDL=PDL, PREFETCH=PREFETCH,
          NORM=False, HAS_RES=False, G_EARLY=False)  # fmt: skip


@triton.jit
def _rms_gemv_kernel(
    X, W, Bias, Y, M, N, sxm, swn, sym, G, R, H, srm, eps,
    K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr,
    PDL: tl.constexpr, PREFETCH: tl.constexpr, HAS_RES: tl.constexpr, G_EARLY: tl.constexpr,
):  # fmt: skip
    # op rmsnorm_linear: the product with the RMSNorm read in.
    _gemv(X, W, Bias, Y, M, N, sxm, swn, sym, 0, G, R, H, srm, eps, K=K, BLOCK_N=BLOCK_N,
          BLOCK_K=BLOCK_K, GATED=False, HAS_BIAS=HAS_BIAS, PDL=PDL, PREFETCH=PREFETCH,
          NORM=True, HAS_RES=HAS_RES, G_EARLY=G_EARLY)  # fmt: skip


def _read_weight(w: GPUArray) -> tuple[GPUArray, bool]:
    """(w with unit-stride rows, whether it was copied): a weight read at a non-unit stride is
    copied first, and that copy is then the kernel just before (no early weight loads)."""
    if w._estrides[-1] != 1:
        return w.contiguous(), True
    return w, False


def _norm_rows(
    norm_weight: GPUArray, residual: GPUArray | None, lead: tuple[int, ...], k: int, x: GPUArray
) -> tuple[GPUArray, GPUArray | None, int, GPUArray | None]:
    """The RMSNorm form's operands: (the norm weight, contiguous; the residual's rows and their
    stride; h = x + residual to store, contiguous [*lead, K]), the last three None, 0, None
    without a residual."""
    g = norm_weight if norm_weight.is_contiguous() else norm_weight.contiguous()
    if residual is None:
        return g, None, 0, None
    r, _, _, sr = as_rows(residual)
    return g, r, sr, empty((*lead, k), x._dtype, x._device)


def _early(x: GPUArray, copied: bool) -> tuple[bool, bool]:
    """(programmatic dependent launch, the first weight tile loaded before the wait): the early
    launch on sm_90+, the early weight loads inside constant_weights() for a weight read in
    place."""
    pdl = pdl_enabled(x._device)
    return pdl, pdl and not copied and weights_are_constant()


def _run(
    x: GPUArray,
    w: GPUArray,
    bias: GPUArray | None,
    out: GPUArray | None,
    n: int,
    gated: bool,
    norm: tuple[GPUArray, float, GPUArray | None] | None = None,
) -> tuple[GPUArray, GPUArray | None]:
    """y (or out=) and, for a norm with a residual, h = x + residual [..., K] (contiguous).
    norm: (the RMSNorm's weight, eps, residual or None)."""
    w, copied = _read_weight(w)
    k = w._shape[1]
    lead = x._shape[:-1]
    x, m, _, sx = as_rows(x)
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    y, sy = out_rows("gemv", out, (*lead, n), x._dtype, x)
    g = r = h = None
    sr, eps = 0, 0.0
    if norm is not None:
        g, r, sr, h = _norm_rows(norm[0], norm[2], lead, k, x)
        eps = norm[1]
    if m and n:
        pdl, prefetch = _early(x, copied)
        prefetch = prefetch and early_tile(n, k, gated, norm is not None)
        # a norm weight copied just now is the kernel ahead: read after the wait
        g_early = prefetch and NORM_WEIGHT_EARLY and norm is not None and g is norm[0]
        bn, warps, bk = tile(k, gated, n, norm is not None)
        grid = (cdiv(n, bn), m)
        b = bias if bias is not None else y
        consts = {"K": k, "BLOCK_N": bn, "BLOCK_K": bk, "HAS_BIAS": bias is not None}
        if g is None:
            launch(
                _gemv_kernel, grid, x, w, b, y, m, n, sx, w._estrides[0], sy,
                n * w._estrides[0], **consts, GATED=gated, PDL=pdl, PREFETCH=prefetch,
                launch_pdl=pdl, num_warps=warps,
            )  # fmt: skip
        else:
            assert not gated
            launch(
                _rms_gemv_kernel, grid, x, w, b, y, m, n, sx, w._estrides[0], sy, g,
                r if r is not None else y, h if h is not None else y, sr, eps, **consts,
                PDL=pdl, PREFETCH=prefetch, HAS_RES=h is not None,
                G_EARLY=g_early, launch_pdl=pdl, num_warps=warps,
            )  # fmt: skip
    elif h is not None and m:  # n == 0: no program stores h
        assert r is not None
        from pygpukit.backends.triton_kernels.elementwise import add

        add(x, r, out=h)
    return deliver(y, out), h


def gemv(
    x: GPUArray, w: GPUArray, bias: GPUArray | None = None, *, out: GPUArray | None = None
) -> GPUArray:
    """x [..., K] @ w[N, K]^T (+ bias) with w of x's dtype (float16/bfloat16)."""
    return _run(x, w, bias, out, w._shape[0], False)[0]


def linear_silu_mul(x: GPUArray, w: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """silu(x @ w[:I]^T) * (x @ w[I:]^T) for w [2I, K] of x's dtype."""
    return _run(x, w, None, out, w._shape[0] // 2, True)[0]


def rmsnorm_linear(
    x: GPUArray,
    norm_weight: GPUArray,
    w: GPUArray,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    *,
    eps: float,
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """rmsnorm(h) @ w[N, K]^T (+ bias), h = x (+ residual); returns y, or (y, h) with a
    residual."""
    y, h = _run(x, w, bias, out, w._shape[0], False, (norm_weight, float(eps), residual))
    return y if h is None else (y, h)


# gp.linear's one-row decode path (op linear_gemv): the same kernel as op gemv.
linear_gemv = gemv
