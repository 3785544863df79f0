"""Embedding lookup: table[ids]."""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["embedding"]


def embedding(ids: GPUArray, table: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """Rows of table [num_embeddings, dim] at integer ids (any shape) -> ids.shape + (dim,).

    Ids outside [0, num_embeddings) raise IndexError (negative ids are not wrapped).
    """
    op = "embedding"
    chk.array(op, "ids", ids)
    chk.array(op, "table", table)
    if not ids.dtype.is_integer:
        raise TypeError(f"{op}: ids must be an integer array, got {chk.desc(ids)}")
    if table.ndim != 2:
        raise ValueError(f"{op}: table must be [num_embeddings, dim], got {chk.desc(table)}")
    if table.dtype.is_packed:
        raise TypeError(f"{op}: table of packed {table.dtype.name} is not supported")
    chk.out_arg(op, out, (*ids.shape, table.shape[1]), table.dtype)
    return run(op, (ids, table), {}, out=out)
