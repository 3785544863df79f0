"""Mixtral's sparse MoE block, gather-by-expert (HF modeling_mixtral.py MixtralSparseMoeBlock).

Router (MixtralTopKRouter): logits = x W_router^T, probabilities = softmax(logits) in float32,
the top-k experts per token, their probabilities renormalised to sum to 1. Each expert is a
gated SiLU MLP: w_down(silu(w_gate x) * w_up x). Output per token = sum over its k experts of
weight * expert(x).

This path gathers the tokens routed to each expert (gp.embedding as a row gather), runs that
expert's three GEMMs on them, scales by the routing weights, and stores the rows into one buffer
ordered by expert; the per-token sum is then k gathers and adds from that buffer (no scatter-add
op needed). The top-k choice is made on the host from the [tokens, experts] probabilities, which
is tiny; a grouped GEMM over all experts in one launch is a later optimisation.
"""

from __future__ import annotations

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import empty, from_numpy
from pygpukit.models.config import ModelConfig
from pygpukit.models.weights import LayerWeights

__all__ = ["moe_forward", "route_top_k"]


def route_top_k(probs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(expert ids [T, k], weights [T, k]) from router probabilities [T, E].

    torch.topk order: largest first; among equal probabilities the lower expert id first (a
    stable sort of -p). Weights are renormalised over the chosen k, in float32 as HF does.
    """
    idx = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    top = np.take_along_axis(probs, idx, axis=-1).astype(np.float32)
    top = top / top.sum(axis=-1, keepdims=True, dtype=np.float32)
    return idx, top


def moe_forward(h: GPUArray, lw: LayerWeights, config: ModelConfig) -> GPUArray:
    """h [B, S, hidden] -> [B, S, hidden] through the top-k experts of each token."""
    assert lw.w_router is not None
    b, s, hd = h.shape
    t = b * s
    k = config.num_experts_per_tok
    x = h.reshape(t, hd)
    probs = ops.softmax(ops.linear(x, lw.w_router).astype("float32"), axis=-1).to_numpy()
    experts, weights = route_top_k(probs, k)
    # Slot j of token i is row (i, j) of the routing; group those rows by expert.
    flat_expert = experts.reshape(-1)
    order = np.argsort(flat_expert, kind="stable")  # rows grouped by expert, tokens ascending
    buf = empty((t * k, hd), h.dtype, h.device)
    where = np.empty(t * k, dtype=np.int64)  # where[row] = position of that row in buf
    where[order] = np.arange(t * k)
    counts = np.bincount(flat_expert, minlength=config.num_experts)
    start = 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        rows = order[start : start + n]
        tokens = from_numpy((rows // k).astype(np.int64), device=h.device)
        w_e = from_numpy(
            weights.reshape(-1)[rows][:, None].astype(h.dtype.np_dtype), device=h.device
        )
        w_gate, w_up, w_down = lw.experts[e]
        xe = ops.embedding(tokens, x)  # gather this expert's tokens [n, hidden]
        ye = ops.linear(ops.silu_mul(ops.linear(xe, w_gate), ops.linear(xe, w_up)), w_down)
        buf[start : start + n] = ops.mul(ye, w_e)
        start += n
    # Sum each token's k expert outputs in ascending expert order, as HF's index_add_ loop does.
    slots = np.sort(experts, axis=-1)
    out: GPUArray | None = None
    for j in range(k):
        # row of token i whose expert is the j-th smallest of its k experts
        pick = np.argmax(experts == slots[:, j : j + 1], axis=-1)
        rows_j = np.arange(t) * k + pick
        part = ops.embedding(from_numpy(where[rows_j], device=h.device), buf)
        out = part if out is None else ops.add(out, part)
    assert out is not None
    return out.reshape(b, s, hd)
