"""Embedding lookup and bias_add (NumPy reference)."""

from __future__ import annotations

import numpy as np

from ._common import Array, DTypeLike, finish, upcast

__all__ = ["bias_add", "embedding"]


def embedding(ids: Array, table: Array) -> Array:
    """table[ids]: ids of any shape (integers), table [num_embeddings, dim] -> ids.shape + (dim,).

    Out-of-range ids raise IndexError; negative ids are rejected rather than wrapped around
    (NumPy would silently read from the end of the table; torch raises too).
    """
    ids, table = np.asarray(ids), np.asarray(table)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be integers, got dtype {ids.dtype}")
    n = table.shape[0]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = np.argwhere((ids < 0) | (ids >= n))[0]
        raise IndexError(
            f"embedding: ids{tuple(int(i) for i in bad)} = {int(ids[tuple(bad)])} is out of "
            f"range for a table of {n} rows"
        )
    return finish(table[ids], table.dtype)


def bias_add(x: Array, bias: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """x + bias, bias broadcast over the last axis; default result dtype: x's dtype."""
    x, bias = np.asarray(x), np.asarray(bias)
    rd = x.dtype if out_dtype is None else np.dtype(out_dtype)
    with np.errstate(all="ignore"):
        y = upcast(x, rd) + upcast(bias, rd)
    return finish(y, rd)
