"""Mixture-of-experts ops in NumPy: the reference of pygpukit/ops/moe.py's contract.

Numerics as the rest of this backend: float64 inputs compute in float64, other floats in float32,
one rounding to the result dtype. The Triton kernels (backends/triton_kernels/moe.py) follow the
same layouts slot for slot, so tests compare the index arrays exactly.
"""

from __future__ import annotations

import numpy as np

from ._common import Array, float_compute_dtype, float_result
from .matmul import product

__all__ = ["moe_router", "moe_align", "moe_linear", "align_layout"]


def moe_router(logits: Array, *, top_k: int, normalize: bool) -> tuple[Array, Array]:
    """(experts int32 [T, k], weights [T, k]): softmax, top-k (largest first, ties in ascending
    expert order), renormalised when ``normalize``. NaN ranks below every number."""
    x = np.asarray(logits)
    ct = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    with np.errstate(all="ignore"):
        s = x.astype(ct)
        m = np.max(s, axis=-1, keepdims=True)
        e = np.exp(s - m)
        p = e / np.sum(e, axis=-1, keepdims=True)
        rank = np.where(np.isnan(p), ct.type(-1), p)
        idx = np.argsort(-rank, axis=-1, kind="stable")[:, :top_k]
        w = np.take_along_axis(p, idx, axis=-1)
        if normalize:
            w = w / np.sum(w, axis=-1, keepdims=True)
    return idx.astype(np.int32), w.astype(ct)


def align_layout(
    experts: Array, num_experts: int, block_m: int
) -> tuple[Array, Array, Array, Array]:
    """(group of each routed row, group starts, group counts, P and NB as an array): the layout
    moe_align writes, in the terms the tests and the kernel share. Group E holds the rows whose
    expert id is outside [0, E)."""
    flat = np.asarray(experts).reshape(-1).astype(np.int64)
    group = np.where((flat >= 0) & (flat < num_experts), flat, num_experts)
    counts = np.bincount(group, minlength=num_experts + 1)
    padded = -(-counts // block_m) * block_m
    starts = np.concatenate([[0], np.cumsum(padded)[:-1]])
    rows = flat.size
    nb = -(-rows // block_m) + min(num_experts + 1, rows)
    return group, starts, counts, np.array([nb * block_m, nb])


def moe_align(experts: Array, *, num_experts: int, block_m: int) -> tuple[Array, Array]:
    """(rows int32 [P], block_expert int32 [NB]); see pygpukit/ops/moe.py."""
    group, starts, counts, (p, nb) = align_layout(experts, num_experts, block_m)
    r = group.size
    out_rows = np.full(p, r, dtype=np.int32)
    block_expert = np.full(nb, -1, dtype=np.int32)
    order = np.argsort(group, kind="stable")  # rows grouped, ascending inside a group
    pos = 0
    for g in range(num_experts + 1):
        c = int(counts[g])
        if c == 0:
            continue
        s = int(starts[g])
        out_rows[s : s + c] = order[pos : pos + c]
        block_expert[s // block_m : (s + c + block_m - 1) // block_m] = g
        pos += c
    return out_rows, block_expert


def moe_linear(
    x: Array,
    w: Array,
    rows: Array,
    block_expert: Array,
    w_up: Array | None,
    row_scale: Array | None,
    *,
    top_k: int,
    block_m: int,
) -> Array:
    """y [R, N]: each listed row r of expert e's blocks gets x[r // top_k] @ w[e]^T (gated with
    w_up: silu(.) * (x w_up[e]^T)), times row_scale[r]; blocks of group E write zeros; slots
    outside [0, R) are skipped; rows no block lists are zeros here (the kernel leaves them)."""
    rd = float_result(np.asarray(x).dtype)
    ct = float_compute_dtype(rd)
    xs = np.asarray(x).astype(ct)
    r_rows = xs.shape[0] * top_k
    y = np.zeros((r_rows, w.shape[1]), dtype=ct)
    n_exp = w.shape[0]
    slots = np.asarray(rows).reshape(-1, block_m)
    for b, e in enumerate(np.asarray(block_expert)):
        listed = slots[b][(slots[b] >= 0) & (slots[b] < r_rows)]
        if listed.size == 0 or not 0 <= e <= n_exp:
            continue
        if e == n_exp:
            y[listed] = 0
            continue
        xe = xs[listed // top_k]
        with np.errstate(all="ignore"):
            # product: one row at a time under the deterministic mode (BLAS picks its kernel
            # by the row count), as the backend's matmul
            h = product(xe, np.asarray(w[e]).astype(ct).T)
            if w_up is not None:
                u = product(xe, np.asarray(w_up[e]).astype(ct).T)
                h = h / (1 + np.exp(-h)) * u
            if row_scale is not None:
                h = h * np.asarray(row_scale)[listed].astype(ct)[:, None]
        y[listed] = h
    return y.astype(rd)
