"""GGUF formats on the device: dequantization (rows or all) and x @ W^T, reading the weight's
planes (pygpukit/_gguf_planes.py: the file's bytes regrouped by field, the same size; decoded by
gguf_blocks.py). x, bias and out may be strided views (their strides are kernel arguments).

The contract is pygpukit/ops/gguf.py's; the NumPy twin is backends/cpu/gguf.py. The kernels
work on tiles of rows x groups x 16 positions: [BN, G, 2, 8] in the CUDA-core product,
[G, BN, 16] in the dequantization and tensor-core kernels (groups lead, so a warp's lanes run
along a row's groups and its byte loads of their scales touch a few rows, not one row a lane).
The quant bytes of a tile are contiguous (vector loads of 8 or 16 bytes a lane when the row's
bytes are a multiple of 16; narrower loads otherwise); a group's scales and high-bit words are
loaded once per group and broadcast over its 16 positions. The dequantization kernel compiles
with FMA contraction off, so its float32 values are the ``gguf`` package's bits.

The product: one program per (BN rows of W, BM rows of x), K in tiles of G groups. One or two
rows of x (or float32 x) run on the CUDA cores (_rows_dot): a group's 16 positions are a [2, 8]
pair of axes and x is loaded in W's shape, so nothing is re-laid out through shared memory; each
half-group's 16 products of x and the exact quants are summed in the lane and scaled once
(a * sum(x q) +/- b * sum(x)); a second x row shares the decoded W. More rows of half x
(ops/gguf.py sends 3 to TENSOR_CORE_MAX_ROWS = 16 here, on a W wide enough to fill the SMs,
outside the deterministic mode, and every row count under it, with a fixed tile) take the
tensor-core kernel (_linear_kernel): each
K tile of W dequantized, rounded to x's dtype and multiplied with tl.dot in float32 (a row's
bits do not depend on the batch; on the CUDA-core path a row's sums never depend on the other
row).

MoE experts (moe_linear_gguf, gp.moe_linear over QuantizedWeight experts): the grouped product of
backends/triton_kernels/moe.py with each expert's rows read from the stacked planes. Up to
ROWWISE_MAX_ROWS routed rows, fewer than two an expert (streams_rows), outside the deterministic
mode, one program per (block of slots, 2 columns) streams the expert's rows against each live
slot's x row on the CUDA cores (_rows_dot); otherwise one program per (block of slots, BN
columns) dequantizes each K tile, rounds it to x's dtype and uses tl.dot. (With many routed rows
an expert, ops/moe.py dequantizes the experts and runs the dense grouped product instead:
EXPERTS_DENSE_MIN_ROWS.)
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math
from typing import Any

import triton
import triton.language as tl

from pygpukit import determinism, precision
from pygpukit._gguf_planes import BLOCKS
from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, new_out
from pygpukit.backends.triton_kernels.activation import sigmoid_c
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.gguf_blocks import (
    FORMAT_IDS,
    affine,
    fields,
    groups_per_row,
    has_offset,
    part_start,
    plane_args,
    quarter,
    quarter_fields,
    quarter_of,
    subtracts_offset,
    values_of,
)
from pygpukit.backends.triton_kernels.moe import block_slots, store_rows
from pygpukit.creation import empty
from pygpukit.dtypes import as_dtype

__all__ = [
    "dequantize_gguf", "linear_gguf", "linear_config", "experts_config", "moe_linear_gguf",
    "streams_rows", "FORMAT_IDS", "TENSOR_CORE_STAGES",
]  # fmt: skip


@triton.jit
def _store_part(Y, r, g, t, w, ok, keep, K, s: tl.constexpr, FMT: tl.constexpr):
    w = tl.where(ok[None, :, None], w, float("nan"))  # an id out of range: NaN, as gp.embedding
    dst = Y + r.to(tl.int64)[None, :, None] * K + part_start(g, s, FMT) + t
    tl.store(dst, w.to(Y.dtype.element_ty), mask=keep)


@triton.jit
def _dequant_kernel(
    P, IDS, Y, R, N, K, NG, RB, OQH, OD, OM, OS,
    FMT: tl.constexpr, HAS_IDS: tl.constexpr, BR: tl.constexpr, G: tl.constexpr,
):  # fmt: skip
    """Tiles [G groups, BR rows, 16 positions]: groups lead, so a warp's lanes run along a
    row's groups and each scale load touches a few rows' consecutive bytes (rows leading, a
    warp's byte loads of a group's scales touched as many rows as lanes)."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    g = (tl.program_id(1) * G + tl.arange(0, G))[:, None, None]
    t = tl.arange(0, 16)[None, None, :]
    live = r < R
    if HAS_IDS:
        src = tl.load(IDS + r, mask=live, other=0).to(tl.int64)
        ok = live & (src >= 0) & (src < N)
    else:
        src = r.to(tl.int64)
        ok = live
    gm = g < NG
    row = (src * RB)[None, :, None]
    m = ok[None, :, None] & gm
    keep = live[None, :, None] & gm
    parts = _tile_parts(_tile_fields(P, row, g, t, m, OQH, OD, OM, OS, FMT), g, t, FMT)
    for s in tl.static_range(2 + 2 * (FMT >= 8)):
        _store_part(Y, r, g, t, parts[s], ok, keep, K, s, FMT)


def dequantize_gguf(
    data: GPUArray, ids: GPUArray | None, *, fmt: str, out_dtype: Any, out: GPUArray | None = None
) -> GPUArray:
    n, rb = data.shape
    qk, bb = BLOCKS[fmt]
    k = rb // bb * qk
    lead = (n,) if ids is None else ids.shape
    rows = math.prod(lead)
    y = out if out is not None else empty((*lead, k), as_dtype(out_dtype), data.device)
    if rows == 0:
        return y
    flat = None if ids is None else (ids if ids.is_contiguous() else ids.contiguous())
    # 2 rows x 64 groups a program: on an H200 (14336x4096 to bfloat16, 2026-11-27) q4_k 42.6
    # us, q6_k 48.7, q3_k 54.1, q8_0 47.0, q4_0 41.2 (about 80% of the copy rate on the bytes
    # moved), against 66.1, 61.8, 62.5, 51.2 and 42.9 us with 8 x 8 tiles and rows leading.
    br, gs = 2, 64
    launch(
        _dequant_kernel, (cdiv(rows, br), cdiv(groups_per_row(fmt, k), gs)),
        data, flat if flat is not None else data, y, rows, n, k, groups_per_row(fmt, k), rb,
        *plane_args(fmt, k),
        FMT=FORMAT_IDS[fmt], HAS_IDS=ids is not None, BR=br, G=gs, num_warps=4,
        enable_fp_fusion=False,
    )  # fmt: skip
    return y


# ----- the tensor-core kernels (more rows; MoE experts that do not stream: streams_rows) -----
# A K tile is G groups of BN rows of W as [G, BN, 16] tiles (one a part: lo and hi, or q2_k /
# q3_k's four quarters). Groups lead, so a warp's lanes run along a row's consecutive groups: its
# byte loads of the groups' scales touch a few rows' consecutive bytes. With rows leading (the
# kernels before), each such load touched one row a lane, 32 rows a warp instruction, and the L1
# was the bottleneck. Each tile's bytes are loaded one K tile ahead (_tile_fields, carried through
# the loop), and the kernels launch with num_stages=1 (TENSOR_CORE_STAGES): Triton's own
# pipelining sent those loads through shared memory, whose bank-conflicted reads then bound the
# loop (ncu on an H200: L1/TEX throughput 82-89%, DRAM 11-19%).
TENSOR_CORE_STAGES = 1


@triton.jit
def _tile_fields(P, row, g, t, mask, OQH, OD, OM, OS, FMT: tl.constexpr):
    """The bytes of a K tile's parts (_tile_parts), loads only, so a kernel issues the next
    tile's before it decodes this one's."""
    if FMT >= 8:
        return (quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, 0, FMT),
                quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, 1, FMT),
                quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, 2, FMT),
                quarter_fields(P, row, g, t, mask, OQH, OD, OM, OS, 3, FMT))  # fmt: skip
    else:
        return fields(P, row, g, t, mask, OQH, OD, OM, OS, FMT)


@triton.jit
def _tile_parts(f, g, t, FMT: tl.constexpr):
    """The float32 values [G, BN, 16] of a K tile's parts (part s starts at part_start(g, s)):
    lo and hi, or q2_k / q3_k's four quarters, from _tile_fields."""
    if FMT >= 8:
        return (quarter_of(f[0], g, 0, FMT), quarter_of(f[1], g, 1, FMT),
                quarter_of(f[2], g, 2, FMT), quarter_of(f[3], g, 3, FMT))  # fmt: skip
    else:
        return values_of(f, g, t, FMT)


@triton.jit
def _x_part(xrow, sxk, xm, gx, t, s: tl.constexpr, FMT: tl.constexpr, BM: tl.constexpr,
            G: tl.constexpr):  # fmt: skip
    """x's values [BM, G * 16] at part s of groups gx [1, G, 1] (rows xrow [BM, 1, 1], mask
    xm)."""
    xi = (part_start(gx, s, FMT) + t).to(tl.int64)  # x may be a wide strided view
    return tl.reshape(tl.load(xrow + xi * sxk, mask=xm, other=0.0), (BM, G * 16))


@triton.jit
def _dot_part(x, w, acc, PREC: tl.constexpr, BN: tl.constexpr, G: tl.constexpr):
    """acc [BM, BN] += x (_x_part) times a part's values w [G, BN, 16] rounded to x's dtype,
    on the tensor cores."""
    wt = tl.reshape(tl.permute(w.to(x.dtype), (0, 2, 1)), (G * 16, BN))
    return tl.dot(x, wt, acc, input_precision=PREC)


@triton.jit
def _tile_products(P, PU, row, nm, xrow, xm, sxk, g_end, NG, OQH, OD, OM, OS,
                   FMT: tl.constexpr, GATED: tl.constexpr, PREC: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr):  # fmt: skip
    """(acc, accu) float32 [BM, BN]: the x rows at xrow [BM, 1, 1] (mask xm) times the W rows
    whose planes start at row [1, BN, 1] of P (mask nm), and of PU when GATED (accu; else
    zeros), over groups [0, g_end) in K tiles of G groups: each tile's bytes loaded one tile
    ahead (_tile_fields carried through the loop), decoded, rounded to x's dtype, tl.dot."""
    t = tl.arange(0, 16)[None, None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    accu = tl.zeros([BM, BN], tl.float32)
    g = tl.arange(0, G)[:, None, None]
    f = _tile_fields(P, row, g, t, nm & (g < g_end), OQH, OD, OM, OS, FMT)
    fu = f
    if GATED:
        fu = _tile_fields(PU, row, g, t, nm & (g < g_end), OQH, OD, OM, OS, FMT)
    for g0 in range(0, g_end, G):
        g = g0 + tl.arange(0, G)[:, None, None]
        gn = g + G
        fn = _tile_fields(P, row, gn, t, nm & (gn < g_end), OQH, OD, OM, OS, FMT)
        fun = fn
        if GATED:
            fun = _tile_fields(PU, row, gn, t, nm & (gn < g_end), OQH, OD, OM, OS, FMT)
        gx = g0 + tl.arange(0, G)[None, :, None]
        parts = _tile_parts(f, g, t, FMT)
        uparts = parts
        if GATED:
            uparts = _tile_parts(fu, g, t, FMT)
        for s in tl.static_range(2 + 2 * (FMT >= 8)):
            x = _x_part(xrow, sxk, xm & (gx < NG), gx, t, s, FMT, BM, G)
            acc = _dot_part(x, parts[s], acc, PREC, BN, G)
            if GATED:
                accu = _dot_part(x, uparts[s], accu, PREC, BN, G)
        f = fn
        fu = fun
    return acc, accu


@triton.jit
def _linear_kernel(
    X, P, BIAS, Y, M, N, NG, RB, OQH, OD, OM, OS, sxm, sxk, sym, syn, sb,
    FMT: tl.constexpr, HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    G: tl.constexpr,
):  # fmt: skip
    """The tensor-core product: one program per (BM rows of x, BN rows of W); each K tile of W
    dequantized, rounded to x's dtype, tl.dot."""
    rm = tl.program_id(1) * BM + tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    nm = (rn < N)[None, :, None]
    row = rn.to(tl.int64)[None, :, None] * RB
    xrow = X + rm.to(tl.int64)[:, None, None] * sxm
    xm = (rm < M)[:, None, None]
    # half x only (linear_config), whose tl.dot precision is x's own: PREC is moot
    acc, _ = _tile_products(P, P, row, nm, xrow, xm, sxk, NG, NG, OQH, OD, OM, OS, FMT, False,
                            "tf32", BM, BN, G)  # fmt: skip
    if HAS_BIAS:
        acc += tl.load(BIAS + rn.to(tl.int64) * sb, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    ptr = Y + rm.to(tl.int64)[:, None] * sym + rn.to(tl.int64)[None, :] * syn
    tl.store(ptr, acc.to(Y.dtype.element_ty), mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def _rows_dot(P, row, X0, X1, sxk, nm, live1, NG, OQH, OD, OM, OS, FMT: tl.constexpr,
              TWO: tl.constexpr, BN: tl.constexpr, G: tl.constexpr):  # fmt: skip
    """(y0, y1) float32 [BN]: the x row at X0 (and, if TWO, the one at X1 where live1) times
    the W rows whose planes start at byte offsets row [BN, 1, 1, 1] (mask nm), over all NG
    groups, on the CUDA cores; W is decoded once for both rows. A group's 16 positions are a
    [2, 8] pair of axes and x is loaded in W's shape (its addresses repeated over the W rows),
    so the quant bytes and x's values load 8 to a lane in one layout and nothing passes through
    shared memory (as one [16] axis, the bytes loaded 16 to a lane and x 8, and each dequantized
    tile was re-laid out through shared memory). Each half-group's 16 products are summed in
    the lane and scaled once (a * sum(x q) +- b * sum(x)); q2_k and q3_k multiply dequantized
    values. A second x row as a leading axis would spread the rows over lanes, each decoding
    the same W, so it is a second set of sums instead."""
    t = (8 * tl.arange(0, 2)[:, None] + tl.arange(0, 8)[None, :])[None, None, :, :]
    part0 = tl.zeros((BN, G, 2, 8), dtype=tl.float32)
    part1 = tl.zeros((BN, G, 2, 8), dtype=tl.float32)
    grp0 = tl.zeros((BN, G, 1, 1), dtype=tl.float32)
    grp1 = tl.zeros((BN, G, 1, 1), dtype=tl.float32)
    for g0 in range(0, NG, G):
        g = g0 + tl.arange(0, G)[None, :, None, None]
        gm = g < NG
        if FMT >= 8:
            for s in tl.static_range(4):
                w = quarter(P, row, g, t, nm & gm, OQH, OD, OM, OS, s, FMT)
                xi = part_start(g, s, FMT) + t
                part0 += _x_tile(X0, sxk, xi, gm, BN, G) * w
                if TWO:
                    part1 += _x_tile(X1, sxk, xi, gm & live1, BN, G) * w
        else:
            dec = affine(P, row, g, t, nm & gm, OQH, OD, OM, OS, FMT)
            xil = part_start(g, 0, FMT) + t
            xih = part_start(g, 1, FMT) + t
            grp0 += _half_groups(X0, sxk, xil, xih, gm, dec, FMT, BN, G)
            if TWO:
                grp1 += _half_groups(X1, sxk, xil, xih, gm & live1, dec, FMT, BN, G)
    return _total(part0, grp0), _total(part1, grp1)


@triton.jit
def _total(part, grp):
    """[BN]: the per-lane products [BN, G, 2, 8] plus the half-group sums [BN, G, 1, 1]."""
    return tl.sum(tl.sum(tl.sum(_lane_sum(part) + grp, axis=3), axis=2), axis=1)


@triton.jit
def _half_groups(xrow, sxk, xil, xih, xm, dec, FMT: tl.constexpr, BN: tl.constexpr,
                 G: tl.constexpr):  # fmt: skip
    """[BN, G, 1, 1]: each half-group's sum of x * value for the x row at xrow (lo values at
    indices xil, hi at xih), as a * sum(x q) +- b * sum(x) from affine's dec."""
    ql, qh, al, bl, ah, bh = dec
    xl = _x_tile(xrow, sxk, xil, xm, BN, G)
    xh = _x_tile(xrow, sxk, xih, xm, BN, G)
    r = al * _lane_sum(xl * ql) + ah * _lane_sum(xh * qh)
    if subtracts_offset(FMT):
        r -= bl * _lane_sum(xl) + bh * _lane_sum(xh)
    elif has_offset(FMT):
        r += bl * _lane_sum(xl) + bh * _lane_sum(xh)
    return r


@triton.jit
def _x_tile(xrow, sxk, xi, xm, BN: tl.constexpr, G: tl.constexpr):
    """x's values at indices xi [1, G, 2, 8] as float32 [BN, G, 2, 8] (W's shape)."""
    xi = tl.broadcast_to(xi.to(tl.int64), (BN, G, 2, 8))  # x may be a wide strided view
    return tl.load(xrow + xi * sxk, mask=tl.broadcast_to(xm, (BN, G, 2, 8)), other=0.0).to(
        tl.float32
    )


@triton.jit
def _lane_sum(v):
    """The sum over the last two axes ([2, 8], held by one lane), keeping them as size 1."""
    return tl.sum(tl.sum(v, axis=3, keep_dims=True), axis=2, keep_dims=True)


@triton.jit
def _gemv_kernel(
    X, P, BIAS, Y, M, N, NG, RB, OQH, OD, OM, OS, sxm, sxk, sym, syn, sb,
    FMT: tl.constexpr, HAS_BIAS: tl.constexpr, TWO: tl.constexpr, BN: tl.constexpr,
    G: tl.constexpr,
):  # fmt: skip
    """The CUDA-core product for few rows of x: one program per (BN rows of W, one or two
    rows of x)."""
    m0 = tl.program_id(1) * (2 if TWO else 1)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    nm = (rn < N)[:, None, None, None]
    row = rn.to(tl.int64)[:, None, None, None] * RB
    x0 = X + m0.to(tl.int64) * sxm
    live1 = m0 + 1 < M
    y0, y1 = _rows_dot(P, row, x0, x0 + sxm, sxk, nm, live1, NG, OQH, OD, OM, OS, FMT, TWO, BN, G)
    if HAS_BIAS:
        b = tl.load(BIAS + rn.to(tl.int64) * sb, mask=rn < N, other=0.0).to(tl.float32)
        y0 += b
        y1 += b
    ptr = Y + m0.to(tl.int64) * sym + rn.to(tl.int64) * syn
    tl.store(ptr, y0.to(Y.dtype.element_ty), mask=rn < N)
    if TWO:
        tl.store(ptr + sym, y1.to(Y.dtype.element_ty), mask=(rn < N) & live1)


# Programs the grid's second axis (rows of x) holds: more rows launch in chunks.
MAX_GRID_Y = 65535


def linear_config(m: int, half: bool) -> tuple[bool, int, int, int, int]:
    """(tensor cores, BM, BN, G groups of 32 values a K tile, warps) for m rows of x: a
    function of m and the dtype only, pinned under the deterministic mode (half x: the
    tensor-core tile; float32 x: two rows a program at every m, so a row alone runs the same
    compiled kernel as in a batch, with the second row masked off).

    The CUDA-core kernel (BM 1 or 2 rows of x a program, each row's sums independent of the
    other) takes BN 2, G 64, two warps, from an H100 sweep (python benchmarks/quantized.py
    --sweep: BN 1-4, G 16-64, 1-2 warps; q4_0, q4_k, q6_k at one and two rows): best or within
    2% of it on the 2048x8192 products, where BN 2, G 32, one warp took 1.1-1.4x as long, and
    within 5% of the best at 14336x4096. The tensor-core tiles, from an H200 sweep at 14336x4096
    (q4_k, q4_0, q8_0, q6_k; 2026-11-27): BN 32, G 4, four warps was best at 4 and 16 rows of x
    and at 64 (BM 64; BN 64 was within 6%); BN 64, G 2 was best at 256."""
    det = determinism.is_deterministic()
    if half and (det or 2 < m <= 16):  # ops/gguf.py sends 3-16 rows here; more: direct calls
        return True, 16, 32, 4, 4
    if half and m > 16:
        return (True, 64, 32, 4, 4) if m <= 64 else (True, 64, 64, 2, 4)
    return False, 1 if m == 1 and not det else 2, 2, 64, 2


def linear_gguf(
    x: GPUArray, data: GPUArray, bias: GPUArray | None, *, fmt: str, out: GPUArray | None = None
) -> GPUArray:
    n, rb = data.shape
    qk, bb = BLOCKS[fmt]
    k = rb // bb * qk
    lead = x.shape[:-1]
    m = math.prod(lead)
    y = new_out(out, (*lead, n), x.dtype, x)
    if m == 0 or n == 0:
        return y
    x2 = x.reshape(m, k) if x.ndim != 2 else x  # a view when the rows collapse, else a copy
    y2 = y.view(m, n)  # ops/gguf.py checked that out's rows collapse
    dot, bm, bn, gs, warps = linear_config(m, x.dtype.name != "float32")
    chunk = MAX_GRID_Y * bm
    for r0 in range(0, m, chunk):
        r1 = min(m, r0 + chunk)
        xs, ys = (x2, y2) if r1 - r0 == m else (x2[r0:r1], y2[r0:r1])
        args = (
            xs, data, bias if bias is not None else data, ys, r1 - r0, n,
            groups_per_row(fmt, k), rb, *plane_args(fmt, k), *xs.element_strides,
            *ys.element_strides,
            bias.element_strides[0] if bias is not None else 0,
        )  # fmt: skip
        grid = (cdiv(n, bn), cdiv(r1 - r0, bm))
        if dot:
            launch(_linear_kernel, grid, *args, FMT=FORMAT_IDS[fmt], HAS_BIAS=bias is not None,
                   BM=bm, BN=bn, G=gs, num_warps=warps,
                   num_stages=TENSOR_CORE_STAGES)  # fmt: skip
        else:
            launch(_gemv_kernel, grid, *args, FMT=FORMAT_IDS[fmt], HAS_BIAS=bias is not None,
                   TWO=bm == 2, BN=bn, G=gs, num_warps=warps)  # fmt: skip
    return y


# ----- MoE experts in a GGUF format ----------------------------------------------------------
@triton.jit
def _grouped_kernel(
    X, P, PU, ROWS, BEXP, SCALE, Y, R, N, NG, E, TOP_K, RB, OQH, OD, OM, OS, sxm, sxk, syr,
    FMT: tl.constexpr, GATED: tl.constexpr, SCALED: tl.constexpr, PREC: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
):  # fmt: skip
    """backends/triton_kernels/moe.py's grouped product with the expert's rows read from GGUF
    planes: one program per (block of BM slots of one expert, BN output columns); the slots' x
    rows gathered, each K tile's values dequantized and rounded to x's dtype for tl.dot (the
    K loop of _linear_kernel: _tile_products)."""
    pid_b = tl.program_id(0)
    pid_n = tl.program_id(1)
    slots, ok, xr, ec, has = block_slots(ROWS, BEXP, pid_b, R, E, TOP_K, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    g_end = tl.where(has, NG, 0)
    row = ((ec * N + rn.to(tl.int64)) * RB)[None, :, None]
    nm = (rn < N)[None, :, None]
    xrow = X + xr[:, None, None] * sxm
    acc, accu = _tile_products(P, PU, row, nm, xrow, ok[:, None, None], sxk, g_end, NG, OQH, OD,
                               OM, OS, FMT, GATED, PREC, BM, BN, G)  # fmt: skip
    store_rows(Y, acc, accu, SCALE, slots, ok, rn, N, syr, GATED, SCALED)


@triton.jit
def _grouped_rows_kernel(
    X, P, PU, ROWS, BEXP, SCALE, Y, R, N, NG, E, TOP_K, RB, OQH, OD, OM, OS, sxm, sxk, syr,
    FMT: tl.constexpr, GATED: tl.constexpr, SCALED: tl.constexpr, BM: tl.constexpr,
    BN: tl.constexpr, G: tl.constexpr,
):  # fmt: skip
    """The grouped product for few routed rows (decode): one program per (block of BM slots,
    BN columns), streaming its expert's rows against each slot's x row on the CUDA cores like
    linear_quantized's one-row path; blocks past the last used one return at once. Blocks, not
    slots, so the grid holds no program per padding slot: a one-token top-2 decode has rows in
    2 of its 48 slots, and 46 empty programs for every 2 working ones took longer than the
    products (H100: 359.3 us a Mixtral layer's experts, against 228.1 us this way)."""
    blk = tl.program_id(0)
    e = tl.load(BEXP + blk)
    if (e >= 0) & (e <= E):
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        valid_e = e < E
        g_end = tl.where(valid_e, NG, 0)
        ec = tl.where(valid_e, e, 0).to(tl.int64)
        row = ((ec * N + rn.to(tl.int64)) * RB)[:, None, None, None]
        nm = (rn < N)[:, None, None, None]
        for i in range(0, BM):
            slot = tl.load(ROWS + blk * BM + i)
            if (slot >= 0) & (slot < R):
                x0 = X + (slot // TOP_K).to(tl.int64) * sxm
                y, _ = _rows_dot(P, row, x0, x0, sxk, nm, False, g_end, OQH, OD, OM, OS, FMT,
                                 False, BN, G)  # fmt: skip
                if GATED:
                    u, _ = _rows_dot(PU, row, x0, x0, sxk, nm, False, g_end, OQH, OD, OM, OS,
                                     FMT, False, BN, G)  # fmt: skip
                    y = y * sigmoid_c(y) * u
                if SCALED:
                    y = y * tl.load(SCALE + slot)
                tl.store(Y + slot.to(tl.int64) * syr + rn, y.to(Y.dtype.element_ty), mask=rn < N)


# Routed rows up to which moe_linear_gguf streams each row on the CUDA cores (decode), while the
# rows are fewer than two an expert (streams_rows); else the tensor-core grouped kernel, which
# decodes each expert's tiles once for all its rows. On an H100 (2026-11-27), a Mixtral-8x7B
# layer (8 experts, top-2), us, streaming against the tensor-core kernel: 2 rows q4_k 231.5 /
# 353.7; 8 rows (one an expert) q4_k 878.4 / 862.1, q4_0 533.3 / 580.2, q6_k 882.3 / 779.1; 16
# rows (two an expert) q4_k 1644.9 / 1106.3, q4_0 978.8 / 709.6, q6_k 1640.8 / 1028.9; a
# Qwen3-30B-A3B layer (128 experts, top-8) at 16 rows: q4_k 63.7 / 82.8, q4_0 47.8 / 58.2.
ROWWISE_MAX_ROWS = 16


def streams_rows(rows: int, experts: int, half: bool) -> bool:
    """Whether moe_linear_gguf streams its rows (the row kernel) rather than the tensor-core
    grouped kernel: up to ROWWISE_MAX_ROWS routed rows, outside the deterministic mode (whose
    one kernel keeps a row's bits independent of the batch), and for half x fewer than two an
    expert (timed with bfloat16 x; float32 x keeps streaming all 16)."""
    if rows > ROWWISE_MAX_ROWS or determinism.is_deterministic():
        return False
    return rows < 2 * experts or not half


def experts_config(block_m: int, fmt: str) -> tuple[int, int, int]:
    """(BN columns, G groups of 32 values a K tile, warps) of the tensor-core experts' kernel
    for blocks of block_m slots: a function of block_m and the format alone (batch invariance
    under the deterministic mode, whose block_m is fixed). From an H200 sweep of a Mixtral-8x7B
    layer (q4_k, q4_0, q6_k, q8_0 at 16, 64, 256 and 1024 tokens; 2026-11-27): BN 32, G 4 was
    best at block_m 16 for every format and at 64 for the k-quants (whose groups carry more
    scale bytes); BN 64, G 2 at 64 for the others (q4_0 1715 against 2059 us) and at 128 for
    all (q4_k tied)."""
    if block_m <= 32 or (block_m <= 64 and FORMAT_IDS[fmt] >= FORMAT_IDS["q4_k"]):
        return 32, 4, 4
    # 256 slots (direct calls only: the engine's block_rows stops at 128): BN 32 keeps the two
    # float32 accumulators at 128 registers a thread (not timed).
    return (64, 2, 4) if block_m <= 128 else (32, 2, 4)


def moe_linear_gguf(
    x: GPUArray,
    data: GPUArray,
    rows: GPUArray,
    block_expert: GPUArray,
    data_up: GPUArray | None,
    row_scale: GPUArray | None,
    *,
    top_k: int,
    block_m: int,
    fmt: str,
    experts: int,
    out: GPUArray | None = None,
) -> GPUArray:
    qk, bb = BLOCKS[fmt]
    rows_all, rb = data.shape
    n = rows_all // experts
    k = rb // bb * qk
    r = x.shape[0] * top_k
    y = new_out(out, (r, n), x.dtype, x)
    if r == 0 or n == 0:
        return y
    half = x.dtype.name != "float32"
    prec = "tf32" if half or precision.allow_tf32() else "ieee"
    ru = rows if rows.is_contiguous() else rows.contiguous()
    be = block_expert if block_expert.is_contiguous() else block_expert.contiguous()
    scale = y if row_scale is None else row_scale.contiguous()
    plan = (ru, be, scale, y, r, n, groups_per_row(fmt, k), experts, top_k, rb, *plane_args(fmt, k))
    if streams_rows(r, experts, half):
        launch(
            _grouped_rows_kernel, (be.shape[0], cdiv(n, 2)),
            x, data, data_up if data_up is not None else data, *plan, *x.element_strides,
            y.element_strides[0],
            FMT=FORMAT_IDS[fmt], GATED=data_up is not None, SCALED=row_scale is not None,
            BM=block_m, BN=2, G=16, num_warps=1,
        )  # fmt: skip
        return y
    bn, gs, warps = experts_config(block_m, fmt)
    launch(
        _grouped_kernel, (be.shape[0], cdiv(n, bn)),
        x, data, data_up if data_up is not None else data, ru, be, scale, y, r, n,
        groups_per_row(fmt, k), experts, top_k, rb, *plane_args(fmt, k), *x.element_strides,
        y.element_strides[0],
        FMT=FORMAT_IDS[fmt], GATED=data_up is not None, SCALED=row_scale is not None, PREC=prec,
        BM=block_m, BN=bn, G=gs, num_warps=warps, num_stages=TENSOR_CORE_STAGES,
    )  # fmt: skip
    return y
