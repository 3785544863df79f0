"""Mixture-of-experts kernels: the router, the grouping by expert, the grouped expert GEMM.

The contract and layouts are pygpukit/ops/moe.py's; the NumPy twin is backends/cpu/moe.py.
Nothing here reads a device value on the host, so a decode step replays from a CUDA graph.

- ``_router_kernel``: BLOCK_T tokens a program, all E experts of a token in one tile; softmax in
  float32, then k rounds of "largest probability, lowest expert id among equals" (torch.topk's
  order), each round masking the expert it picked. NaN ranks below every number, so ids stay in
  [0, E) for any logits.
- The grouping (a stable counting sort into per-expert groups padded to block_m): with one chunk
  of rows (decode) ``_align_one`` does it in one program; otherwise three launches, parallel
  over chunks of rows (chunk_rows): ``_count_kernel`` (a per-chunk histogram),
  ``_offsets_kernel`` (one program: group starts, each chunk's offset into each group, the
  block -> expert map and the padding slots), ``_scatter_kernel`` (each row's slot: its chunk's
  offset plus its rank among the chunk's rows of the same group, an inclusive cumsum of one-hot
  rows). Every slot is written exactly once, either with a row or with the sentinel R, so no
  ordering between programs is needed. The result is the same integers whatever the chunking
  (the tests compare with NumPy).
- ``_grouped_kernel``: one program per (block of block_m slots, BLOCK_N columns). The block's
  expert selects the weight matrix; the slots' rows are gathered into the A tile (slot r reads
  x[r // top_k]) and the float32 result is stored to y[r] (so the permutation and its inverse
  cost no extra pass); the gated form keeps two accumulators and applies silu(g) * u in float32,
  then the routing weight, then one rounding. A block of the out-of-range group writes zeros;
  a block naming no group, or a slot outside [0, R), touches nothing.

Batch invariance: a routed row's result depends on its expert and its x row only, through a tile
configuration that is a function of (block_m, dtype) alone, so with a fixed block_m (the engine
uses 16 under the deterministic mode) a row's bits do not depend on the batch.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit import precision
from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    cdiv,
    new_out,
    next_pow2,
    tl_dtype,
)
from pygpukit.backends.triton_kernels.activation import sigmoid_c
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import float32, float64, int32

__all__ = ["moe_router", "moe_align", "moe_linear", "grouped_config", "block_slots", "store_rows"]

# The grouping's tiles: [rows, groups] one-hot tiles of about _TILE elements (groups = E + 1
# rounded up to a power of two), so a chunk holds fewer rows when there are more experts.
_TILE = 8192


def chunk_rows(groups: int) -> int:
    """Rows per program of the grouping's parallel kernels for a power-of-two group count."""
    return max(16, min(1024, _TILE // groups))


# ----- router --------------------------------------------------------------------------------
@triton.jit
def _router_kernel(
    L, IDS, W, T, E, sl0, sl1,
    K: tl.constexpr, KP: tl.constexpr, NORMALIZE: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    live = (t < T)[:, None] & (cols < E)[None, :]
    x = tl.load(
        L + t.to(tl.int64)[:, None] * sl0 + cols[None, :] * sl1, mask=live, other=float("-inf")
    ).to(tl.float32)
    m = tl.max(x, 1)
    m = tl.where(m == float("-inf"), 0.0, m)  # a row without a finite logit: 0/0 below, NaN
    ex = tl.where(live, tl.exp(x - m[:, None]), 0.0)
    p = ex / tl.sum(ex, 1)[:, None]
    rank = tl.where(p == p, p, -1.0)  # NaN below every probability
    rank = tl.where((cols < E)[None, :], rank, -2.0)  # padding columns below NaN
    slot = tl.arange(0, KP)
    ids = tl.zeros([BLOCK_T, KP], tl.int32)
    vals = tl.zeros([BLOCK_T, KP], tl.float32)
    for j in tl.static_range(K):
        best = tl.max(rank, 1)
        pick = tl.min(tl.where(rank == best[:, None], cols[None, :], BLOCK_E), 1)
        hit = cols[None, :] == pick[:, None]
        v = tl.sum(tl.where(hit, p, 0.0), 1)
        ids = tl.where(slot[None, :] == j, pick[:, None], ids)
        vals = tl.where(slot[None, :] == j, v[:, None], vals)
        rank = tl.where(hit, -3.0, rank)
    if NORMALIZE:
        vals = vals / tl.sum(vals, 1)[:, None]
    out = t.to(tl.int64)[:, None] * K + slot[None, :]
    keep = (t < T)[:, None] & (slot < K)[None, :]
    tl.store(IDS + out, ids, mask=keep)
    tl.store(W + out, vals.to(W.dtype.element_ty), mask=keep)


def moe_router(
    logits: GPUArray, *, top_k: int, normalize: bool, out: None = None
) -> tuple[GPUArray, GPUArray]:
    t, e = logits.shape  # two results: the op takes no out= (the dispatcher passes None)
    ids = empty((t, top_k), int32, logits.device)
    w = empty((t, top_k), float64 if logits.dtype is float64 else float32, logits.device)
    if t == 0:
        return ids, w
    be = next_pow2(max(e, 16))
    bt = max(1, min(64, 4096 // be))
    launch(
        _router_kernel, (cdiv(t, bt),),
        logits, ids, w, t, e, *logits.element_strides,
        K=top_k, KP=next_pow2(top_k), NORMALIZE=normalize, BLOCK_T=bt, BLOCK_E=be, num_warps=4,
    )  # fmt: skip
    return ids, w


# ----- grouping ------------------------------------------------------------------------------
@triton.jit
def _one_hot(EXP, r0, R, E, BLOCK_R: tl.constexpr, G: tl.constexpr):
    """int32 [BLOCK_R, G]: row r0 + i is in group g (its expert, or E when out of range)."""
    r = r0 + tl.arange(0, BLOCK_R)
    ok = r < R
    ex = tl.load(EXP + r, mask=ok, other=0)
    grp = tl.where((ex >= 0) & (ex < E), ex, E)
    hot = (grp[:, None] == tl.arange(0, G)[None, :]) & ok[:, None]
    return hot.to(tl.int32), r, ok


@triton.jit
def _layout(counts, R, NB, BEXP, ROWS, BM: tl.constexpr, G: tl.constexpr, BLOCK_B: tl.constexpr):
    """From the group counts: the group starts, the block -> group map and the padding slots
    (sentinel R). Returns the starts."""
    g = tl.arange(0, G)
    padded = (counts + BM - 1) // BM * BM
    ends = tl.cumsum(padded, 0)
    starts = ends - padded
    total = tl.sum(padded, 0)
    for b0 in range(0, NB, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        s = b * BM
        # the group holding slot s: the number of groups that end at or before it (groups are
        # padded to whole blocks, so a block never straddles two)
        gi = tl.sum((ends[None, :] <= s[:, None]).to(tl.int32), 1)
        tl.store(BEXP + b, tl.where(s < total, gi, -1), mask=b < NB)
        sel = g[None, :] == gi[:, None]
        st = tl.sum(tl.where(sel, starts[None, :], 0), 1)
        cnt = tl.sum(tl.where(sel, counts[None, :], 0), 1)
        slot = s[:, None] + tl.arange(0, BM)[None, :]
        pad = (s >= total)[:, None] | (slot - st[:, None] >= cnt[:, None])
        tl.store(ROWS + slot, tl.zeros_like(slot) + R, mask=(b < NB)[:, None] & pad)
    return starts


@triton.jit
def _align_one(
    EXP, ROWS, BEXP, R, E, NB,
    BM: tl.constexpr, G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr,
):  # fmt: skip
    """All R rows in one program (R <= BLOCK_R): count, lay out, scatter."""
    hot, r, ok = _one_hot(EXP, 0, R, E, BLOCK_R, G)
    starts = _layout(tl.sum(hot, 0), R, NB, BEXP, ROWS, BM, G, BLOCK_B)
    rank = tl.cumsum(hot, 0)
    pos = tl.sum(tl.where(hot != 0, starts[None, :] + rank - 1, 0), 1)
    tl.store(ROWS + pos, r, mask=ok)


@triton.jit
def _count_kernel(EXP, CNT, R, E, BLOCK_R: tl.constexpr, G: tl.constexpr):
    c = tl.program_id(0)
    hot, _, _ = _one_hot(EXP, c * BLOCK_R, R, E, BLOCK_R, G)
    tl.store(CNT + c * G + tl.arange(0, G), tl.sum(hot, 0))


@triton.jit
def _offsets_kernel(
    CNT, OFF, ROWS, BEXP, R, NB, n_chunks,
    BM: tl.constexpr, G: tl.constexpr, BLOCK_B: tl.constexpr,
):  # fmt: skip
    g = tl.arange(0, G)
    counts = tl.zeros([G], tl.int32)
    for c in range(0, n_chunks):
        counts += tl.load(CNT + c * G + g)
    starts = _layout(counts, R, NB, BEXP, ROWS, BM, G, BLOCK_B)
    running = starts
    for c in range(0, n_chunks):  # chunk c's first slot in each group
        tl.store(OFF + c * G + g, running)
        running += tl.load(CNT + c * G + g)


@triton.jit
def _scatter_kernel(EXP, OFF, ROWS, R, E, BLOCK_R: tl.constexpr, G: tl.constexpr):
    c = tl.program_id(0)
    hot, r, ok = _one_hot(EXP, c * BLOCK_R, R, E, BLOCK_R, G)
    off = tl.load(OFF + c * G + tl.arange(0, G))
    rank = tl.cumsum(hot, 0)
    pos = tl.sum(tl.where(hot != 0, off[None, :] + rank - 1, 0), 1)
    tl.store(ROWS + pos, r, mask=ok)


def moe_align(
    experts: GPUArray, *, num_experts: int, block_m: int, out: None = None
) -> tuple[GPUArray, GPUArray]:
    ex = experts if experts.is_contiguous() else experts.contiguous()
    r = ex.size
    groups = min(num_experts + 1, r)
    nb = cdiv(r, block_m) + groups
    rows = empty((nb * block_m,), int32, ex.device)
    block_expert = empty((nb,), int32, ex.device)
    g = next_pow2(max(num_experts + 1, 16))
    bb = max(1, min(64, _TILE // g))
    chunk = chunk_rows(g)
    if r <= chunk:
        br = next_pow2(max(r, 16))
        launch(
            _align_one, (1,), ex, rows, block_expert, r, num_experts, nb,
            BM=block_m, G=g, BLOCK_R=br, BLOCK_B=bb, num_warps=4,
        )  # fmt: skip
        return rows, block_expert
    n_chunks = cdiv(r, chunk)
    cnt = empty((n_chunks, g), int32, ex.device)
    off = empty((n_chunks, g), int32, ex.device)
    launch(_count_kernel, (n_chunks,), ex, cnt, r, num_experts, BLOCK_R=chunk, G=g, num_warps=4)
    launch(
        _offsets_kernel, (1,), cnt, off, rows, block_expert, r, nb, n_chunks,
        BM=block_m, G=g, BLOCK_B=bb, num_warps=4,
    )  # fmt: skip
    launch(
        _scatter_kernel, (n_chunks,), ex, off, rows, r, num_experts, BLOCK_R=chunk, G=g,
        num_warps=4,
    )  # fmt: skip
    return rows, block_expert


# ----- grouped GEMM --------------------------------------------------------------------------
def grouped_config(block_m: int, half: bool) -> tuple[int, int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps, num_stages): a function of block_m and the dtype class
    only, so a row's arithmetic never depends on the batch (see the module docstring). Chosen by
    benchmarks/tuning/tune_moe.py on an H100 (bf16, Mixtral-8x7B and Qwen3-30B-A3B layers at
    256 and 4096 tokens, 2026-11-26): at 4096 tokens block_m 128 with (128, 64, 8, 3) ran the
    Mixtral layer at 534 TFLOP/s (block_m 64: 417 with (128, 64, 4, 4), 375 with 8 warps and 3
    stages); 256-row tiles and 2-stage pipelines were slower everywhere. float32 tiles are
    twice the bytes: BLOCK_K halves so the pipeline's A tile and two B tiles (gated) fit the
    shared memory (228 KiB on Hopper)."""
    if block_m <= 32:
        return 64, (128 if half else 64), 4, 3
    bk = 64 if half else 32
    if block_m == 64:
        return 128, bk, 4, 4
    return 128, bk, 8, 3


@triton.jit
def block_slots(ROWS, BEXP, pid_b, R, E, TOP_K, BM: tl.constexpr):
    """(slots, ok, x rows, expert, has expert) of block pid_b of moe_align's layout: ok marks
    the slots holding a routed row of a live group (an expert, or group E of out-of-range ids,
    written as zeros); the expert index is clamped to 0 where there is none. Shared with the
    GGUF experts' kernel (backends/triton_kernels/gguf.py)."""
    e = tl.load(BEXP + pid_b)
    live = (e >= 0) & (e <= E)
    slots = tl.load(ROWS + pid_b.to(tl.int64) * BM + tl.arange(0, BM))
    ok = (slots >= 0) & (slots < R) & live
    xr = tl.where(ok, slots // TOP_K, 0).to(tl.int64)
    has = (e >= 0) & (e < E)
    return slots, ok, xr, tl.where(has, e, 0).to(tl.int64), has


@triton.jit
def store_rows(Y, acc, accu, SCALE, slots, ok, rn, N, syr, GATED: tl.constexpr,
               SCALED: tl.constexpr):  # fmt: skip
    """The grouped product's epilogue: silu(gate) * up, the routing weight, one rounding, the
    store to each slot's row (so the permutation's inverse costs nothing)."""
    y = acc
    if GATED:
        y = y * sigmoid_c(y) * accu
    if SCALED:
        y = y * tl.load(SCALE + tl.where(ok, slots, 0), mask=ok, other=0.0)[:, None]
    yp = Y + slots.to(tl.int64)[:, None] * syr + rn[None, :]
    tl.store(yp, y.to(Y.dtype.element_ty), mask=ok[:, None] & (rn < N)[None, :])


@triton.jit
def _grouped_kernel(
    X, W, WU, ROWS, BEXP, SCALE, Y, R, N, K, E, TOP_K,
    sxm, sxk, swe, swn, swk, sue, sun, suk, syr,
    GATED: tl.constexpr, SCALED: tl.constexpr, DT: tl.constexpr, PREC: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    pid_b = tl.program_id(0)
    pid_n = tl.program_id(1)
    slots, ok, xr, ec, has = block_slots(ROWS, BEXP, pid_b, R, E, TOP_K, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    k_end = tl.where(has, K, 0)
    acc = tl.zeros([BM, BN], tl.float32)
    accu = tl.zeros([BM, BN], tl.float32)
    for k in range(0, k_end, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(
            X + xr[:, None] * sxm + rk[None, :] * sxk, mask=ok[:, None] & (rk < K)[None, :],
            other=0.0,
        )  # fmt: skip
        wmask = (rk < K)[:, None] & (rn < N)[None, :]
        rk64 = rk.to(tl.int64)[:, None]
        rn64 = rn.to(tl.int64)[None, :]
        b = tl.load(W + ec * swe + rk64 * swk + rn64 * swn, mask=wmask, other=0.0)
        acc = tl.dot(a.to(DT), b.to(DT), acc, input_precision=PREC)
        if GATED:
            bu = tl.load(WU + ec * sue + rk64 * suk + rn64 * sun, mask=wmask, other=0.0)
            accu = tl.dot(a.to(DT), bu.to(DT), accu, input_precision=PREC)
    store_rows(Y, acc, accu, SCALE, slots, ok, rn, N, syr, GATED, SCALED)


def moe_linear(
    x: GPUArray,
    w: GPUArray,
    rows: GPUArray,
    block_expert: GPUArray,
    w_up: GPUArray | None,
    row_scale: GPUArray | None,
    *,
    top_k: int,
    block_m: int,
    out: GPUArray | None = None,
) -> GPUArray:
    e, n, k = w.shape
    r = x.shape[0] * top_k
    y = new_out(out, (r, n), x.dtype, x)
    if r == 0 or n == 0:
        return y
    half = x.dtype.name != "float32"
    bn, bk, warps, stages = grouped_config(block_m, half)
    prec = "tf32" if half or precision.allow_tf32() else "ieee"
    ru = rows if rows.is_contiguous() else rows.contiguous()
    be = block_expert if block_expert.is_contiguous() else block_expert.contiguous()
    wu = w_up if w_up is not None else w
    scale = y if row_scale is None else row_scale.contiguous()
    launch(
        _grouped_kernel, (be.shape[0], cdiv(n, bn)),
        x, w, wu, ru, be, scale, y, r, n, k, e, top_k,
        *x.element_strides, *w.element_strides, *wu.element_strides, y.element_strides[0],
        GATED=w_up is not None, SCALED=row_scale is not None, DT=tl_dtype(x.dtype), PREC=prec,
        BM=block_m, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return y
