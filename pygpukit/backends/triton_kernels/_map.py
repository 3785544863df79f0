"""The elementwise engine: one contiguous and one N-d strided kernel, parameterised by the math.

Every elementwise family (elementwise, unary, activation, copy/cast, bias_add) supplies a
``@triton.jit`` math function ``FN(a, b, c, CT, OPT)`` returning the value to store; this module
loads up to three operands (arrays, or scalars passed as bits, see _common.scalar_bits), calls it
and stores the result. FN and OPT are constexprs, so each op compiles to its own straight-line
kernel.

Two kernels, picked on the host per call:
- ``_flat_kernel``: every array operand contiguous with the output's shape. A 1-D block of
  BLOCK elements per program (flat_cfg), int64 base offset, 128-bit accesses.
- ``_nd_kernel``: anything else (broadcast stride-0 operands, transposed or step-sliced views, a
  strided out=). Dims are collapsed jointly over all operands (merge_dims); the innermost
  collapsed dim is the tile's column axis, the others (up to MAX_OUTER) are decomposed per row
  with div/mod on a [BLOCK_R] vector only, so the per-element cost is one multiply-add per dim.
  More than 1 + MAX_OUTER collapsed dims split on the host along the leading dim (rare).
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from pygpukit.backends._support.collapse import split_leading
from pygpukit.backends.triton_kernels._common import (
    MAX_OUTER,
    GPUArray,
    cdiv,
    contiguous_strides,
    flat_cfg,
    nd_args,
    nd_offsets,
    nd_tile,
    plan_nd,
    scalar_value,
)
from pygpukit.backends.triton_kernels.driver import launch

__all__ = ["run_map"]

_ARRAY, _SCALAR = 0, 1


@triton.jit
def _operand(ptr, offs, mask, hi, lo, K: tl.constexpr, CT: tl.constexpr):
    if K == 0:
        v = tl.load(ptr + offs, mask=mask)
    else:
        v = scalar_value(hi, lo, CT)
    return v


@triton.jit(do_not_specialize=["h0", "l0", "h1", "l1", "h2", "l2"])
def _flat_kernel(
    out, x0, x1, x2, h0, l0, h1, l1, h2, l2, n,
    FN: tl.constexpr, OPT: tl.constexpr, CT: tl.constexpr,
    K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    base = tl.program_id(0).to(tl.int64) * BLOCK
    offs = tl.arange(0, BLOCK)
    mask = offs < n - base
    a = _operand(x0 + base, offs, mask, h0, l0, K0, CT)
    b = _operand(x1 + base, offs, mask, h1, l1, K1, CT)
    c = _operand(x2 + base, offs, mask, h2, l2, K2, CT)
    y = FN(a, b, c, CT, OPT)
    tl.store(out + base + offs, y.to(out.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["h0", "l0", "h1", "l1", "h2", "l2"])
def _nd_kernel(
    out, x0, x1, x2, h0, l0, h1, l1, h2, l2,
    n_rows, n_cols, D1, D2, D3,
    so0, so1, so2, so3, so4,
    sa0, sa1, sa2, sa3, sa4,
    sb0, sb1, sb2, sb3, sb4,
    sc0, sc1, sc2, sc3, sc4,
    FN: tl.constexpr, OPT: tl.constexpr, CT: tl.constexpr,
    K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_cb = tl.cdiv(n_cols, BLOCK_C)
    rb = pid // n_cb
    cb = pid - rb * n_cb
    rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = cb.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    oa = nd_offsets(rows, cols, D1, D2, D3, sa0, sa1, sa2, sa3, sa4)
    ob = nd_offsets(rows, cols, D1, D2, D3, sb0, sb1, sb2, sb3, sb4)
    oc = nd_offsets(rows, cols, D1, D2, D3, sc0, sc1, sc2, sc3, sc4)
    a = _operand(x0, oa, mask, h0, l0, K0, CT)
    b = _operand(x1, ob, mask, h1, l1, K1, CT)
    c = _operand(x2, oc, mask, h2, l2, K2, CT)
    y = FN(a, b, c, CT, OPT)
    oo = nd_offsets(rows, cols, D1, D2, D3, so0, so1, so2, so3, so4)
    tl.store(out + oo, y.to(out.dtype.element_ty), mask=mask)


_plans: dict[tuple[Any, ...], tuple[list[int], list[list[int]], tuple[int, int, int]] | None] = {}


def _plan(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> Any:
    key = (shape, strides)
    plan = _plans.get(key)
    if plan is None and key not in _plans:
        rows = plan_nd(shape, strides)
        if len(rows) <= 1 + MAX_OUTER:
            sizes, st = nd_args(rows, len(strides))
            plan = (sizes, st, nd_tile(sizes[0], sizes[1]))
        if len(_plans) > 4096:  # a bounded cache: shapes in a model are few
            _plans.clear()
        _plans[key] = plan
    return plan


def run_map(
    fn: Any,
    opt: Any,
    ct: Any,
    out: GPUArray,
    operands: tuple[Any, ...],
) -> GPUArray:
    """out[...] = fn(operands...) elementwise.

    operands: up to 3 entries, each a GPUArray broadcastable to out.shape or an (hi, lo) scalar
    bits pair (scalar_bits); fewer than 3 are padded with the scalar 0.
    """
    shape = out.shape
    n = out.size
    if n == 0:
        return out
    ptrs: list[Any] = []
    bits: list[int] = []
    kinds: list[int] = []
    arrays: list[GPUArray] = []
    for op in operands:
        if isinstance(op, GPUArray):
            if op.shape != shape:
                op = op.broadcast_to(shape)
            ptrs.append(op)
            bits += (0, 0)
            kinds.append(_ARRAY)
            arrays.append(op)
        else:
            ptrs.append(out)  # never dereferenced: the kernel uses the scalar
            bits += op
            kinds.append(_SCALAR)
    while len(ptrs) < 3:
        ptrs.append(out)
        bits += (0, 0)
        kinds.append(_SCALAR)
    contig = contiguous_strides(shape)
    if out._estrides == contig and all(a._estrides == contig for a in arrays):
        block, warps = flat_cfg(n)
        launch(
            _flat_kernel, (cdiv(n, block),), out, *ptrs, *bits, n,
            FN=fn, OPT=opt, CT=ct, K0=kinds[0], K1=kinds[1], K2=kinds[2],
            BLOCK=block, num_warps=warps,
        )  # fmt: skip
        return out
    strides = (out._estrides, *(p._estrides for p in ptrs))
    plan = _plan(shape, strides)
    if plan is None or plan[0][0] >= 1 << 31:
        # Too many dims to decompose (or 2**31 rows): split along the leading dim.
        for i in range(shape[0]):
            run_map(fn, opt, ct, out[i], split_leading(operands, shape, i))
        return out
    sizes, st, (br, bc, warps) = plan
    grid = (cdiv(sizes[0], br) * cdiv(sizes[1], bc),)
    launch(
        _nd_kernel, grid, out, *ptrs, *bits, *sizes, *st[0], *st[1], *st[2], *st[3],
        FN=fn, OPT=opt, CT=ct, K0=kinds[0], K1=kinds[1], K2=kinds[2],
        BLOCK_R=br, BLOCK_C=bc, num_warps=warps,
    )  # fmt: skip
    return out
