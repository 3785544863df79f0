"""Embedding gather (table[ids]) and bias_add (x + bias over the last axis).

embedding: ids of any shape and integer dtype, any strides; table [num_embeddings, dim] of any
dtype and strides; out is ids.shape + (dim,). One program per (id, BLOCK_D columns): each reads
one id and copies a row slice. No host sync, so an id outside [0, num_embeddings) is not an
IndexError as in the reference: its output row is NaN for float tables and 0 for integer/bool
tables (the table is never read out of bounds).

bias_add: the elementwise add engine with the bias as a stride-0 broadcast view; the default
result dtype is x's and the sum runs in its compute dtype, as the reference.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    as_dt,
    cdiv,
    compute_tl,
    new_out,
    next_pow2,
    plan_rows,
    row_offset,
)
from pygpukit.backends.triton_kernels._map import run_map
from pygpukit.backends.triton_kernels.copy import contiguous, copy
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.elementwise import binary_fn

__all__ = ["bias_add", "embedding"]


@triton.jit
def _embedding_kernel(
    IDS, T, Y, n_rows, dim, D1, D2, si0, si1, si2, sy0, sy1, sy2, syd, stn, std,
    IS_FLOAT: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cm = cols < dim
    idx = tl.load(IDS + row_offset(r, D1, D2, si0, si1, si2)).to(tl.int64)
    valid = (idx >= 0) & (idx < n_rows)
    idx = tl.where(valid, idx, 0)
    if IS_FLOAT:
        v = tl.load(T + idx * stn + cols * std, mask=cm & valid, other=float("nan"))
    else:
        v = tl.load(T + idx * stn + cols * std, mask=cm & valid, other=0)
    tl.store(Y + row_offset(r, D1, D2, sy0, sy1, sy2) + cols * syd, v, mask=cm)


def embedding(ids: GPUArray, table: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """table[ids] -> ids.shape + (dim,)."""
    dim = table.shape[1]
    y = new_out(out, (*ids.shape, dim), table.dtype, table)
    n = ids.size
    if n == 0 or dim == 0:
        return y
    lead = ids.shape or (1,)
    strides = (ids.element_strides or (0,), y.element_strides[:-1] or (0,))
    plan = plan_rows(lead, strides)
    if plan is None:  # ids or out dims that do not collapse to three (rare)
        res = embedding(contiguous(ids), table)
        return copy(res, out=y)
    sizes, st = plan
    # Up to 2048 columns a program: rows of 4096 bf16 take two programs, enough to fill the GPU
    # with a decode batch of 64 tokens while each thread still moves 128-bit vectors.
    bd = min(next_pow2(dim), 2048)
    warps = 8 if bd >= 2048 else 4
    launch(
        _embedding_kernel, (n, cdiv(dim, bd)),
        ids, table, y, table.shape[0], dim, sizes[1], sizes[2], *st[0], *st[1],
        y.element_strides[-1], *table.element_strides,
        IS_FLOAT=table.dtype.is_floating, BLOCK_D=bd, num_warps=warps,
    )  # fmt: skip
    return y


def bias_add(
    x: GPUArray, bias: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None
) -> GPUArray:
    """x + bias (bias [x.shape[-1]] broadcast over the leading dims); out may be x (in place)."""
    rd = x.dtype if out_dtype is None else as_dt(out_dtype)
    ct = compute_tl(rd)
    res = new_out(out, x.shape, rd, x)
    return run_map(binary_fn, "add", ct, res, (x, bias))
