"""Float64 references of the MoE ops (pygpukit/ops/moe.py), written from the definitions, not
from either backend: HF's router formula, the grouping's invariants, and the expert product of
each routed row computed on its own."""

from __future__ import annotations

from typing import Any

import numpy as np


def router(logits: np.ndarray, k: int, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights): torch.topk over float64 softmax probabilities, ties to the lower id."""
    s = logits.astype(np.float64)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.empty((s.shape[0], k), dtype=np.int64)
    for t in range(s.shape[0]):
        ids[t] = sorted(range(s.shape[1]), key=lambda e, t=t: (-p[t, e], e))[:k]
    w = np.take_along_axis(p, ids, -1)
    if normalize:
        w = w / w.sum(-1, keepdims=True)
    return ids, w


def check_align(
    rows: np.ndarray, block_expert: np.ndarray, experts: np.ndarray, n_exp: int, bm: int
) -> None:
    """The grouping's contract: every routed row listed once, in its expert's blocks (E for
    out-of-range ids), groups in expert order and rows ascending inside each, padding = R,
    -1 only after the last used block."""
    flat = experts.reshape(-1)
    r = flat.size
    group = np.where((flat >= 0) & (flat < n_exp), flat, n_exp)
    slots = rows.reshape(-1, bm)
    assert slots.shape[0] == block_expert.size
    listed = rows[rows != r]
    assert sorted(listed.tolist()) == list(range(r)), "every routed row exactly once"
    used = block_expert[block_expert >= 0]
    assert (block_expert[used.size :] == -1).all() and (np.diff(used) >= 0).all()
    for b, g in enumerate(block_expert):
        if g < 0:
            assert (slots[b] == r).all()
            continue
        real = slots[b][slots[b] != r]
        assert (group[real] == g).all(), f"block {b} of group {g} lists {real}"
    for g in range(n_exp + 1):
        mine = np.concatenate([slots[b] for b in np.flatnonzero(block_expert == g)] or [[]])
        real = mine[mine != r].astype(np.int64)
        assert real.tolist() == np.flatnonzero(group == g).tolist(), f"group {g} order"
        if real.size:  # padding only at the group's end
            assert (mine[: real.size] != r).all()


def moe_linear(
    x: np.ndarray,
    w: np.ndarray,
    experts: np.ndarray,
    top_k: int,
    w_up: np.ndarray | None = None,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """y[r] for routed row r = (token r // top_k, expert experts.flat[r]) in float64; rows of an
    out-of-range expert are zeros."""
    flat = experts.reshape(-1)
    y = np.zeros((x.shape[0] * top_k, w.shape[1]))
    for r, e in enumerate(flat):
        if not 0 <= e < w.shape[0]:
            continue
        xr = x[r // top_k].astype(np.float64)
        h: Any = w[e].astype(np.float64) @ xr
        if w_up is not None:
            h = h / (1 + np.exp(-h)) * (w_up[e].astype(np.float64) @ xr)
        if scale is not None:
            h = h * float(scale[r])
        y[r] = h
    return y
