"""The sparse MoE block of Mixtral and Qwen3-MoE on routed device ops (pygpukit/ops/moe.py).

HF's modules (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock): router logits = x W_router^T,
probabilities = softmax in float32, the top-k experts per token, their probabilities
renormalised to sum 1 (always for Mixtral, with norm_topk_prob for Qwen3-MoE). Each expert is a
gated SiLU MLP w_down(silu(w_gate x) * w_up x); a token's output is the sum over its k experts of
weight * expert(x).

Here that is five launches a layer whatever the expert count: the router product, moe_router,
moe_align (group the T*k routed rows by expert), moe_linear with w_up (gate and up products
with silu(g) * u fused, x rows gathered in the loads), moe_linear with the routing weight in its
epilogue (rows stored back in token order), then the sum of each token's k rows. No value goes
to the host, so a decode step with MoE layers is captured in a CUDA graph like a dense one.

Numerics against HF: the routing weight multiplies the float32 product before its one rounding
(HF rounds the expert output to the model dtype, then multiplies by a weight rounded to it), and
the k rows are summed in slot order in float32 (HF: index_add_ in ascending expert order, in the
model dtype). In float32 both round alike up to the order of k additions.
"""

from __future__ import annotations

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.determinism import is_deterministic
from pygpukit.models.config import ModelConfig
from pygpukit.models.weights import LayerWeights

__all__ = ["moe_forward", "block_rows"]


def block_rows(routed: int, num_experts: int) -> int:
    """The grouped GEMM's row tile for ``routed`` rows over ``num_experts`` experts: 16 (the
    smallest tensor-core tile) until an expert's average group fills more, up to 128 (measured
    by benchmarks/tuning/tune_moe.py; the tiles per block_m are in backends/triton_kernels/
    moe.py grouped_config). Fixed at 16 under the deterministic mode, so a row's product never
    depends on the batch."""
    if is_deterministic():
        return 16
    avg = routed // max(num_experts, 1)
    return 128 if avg >= 96 else 64 if avg >= 48 else 32 if avg >= 24 else 16


def moe_forward(h: GPUArray, lw: LayerWeights, config: ModelConfig) -> GPUArray:
    """h [B, S, hidden] -> [B, S, hidden] through the top-k experts of each token."""
    assert lw.w_router is not None and lw.w_experts_gate is not None
    assert lw.w_experts_up is not None and lw.w_experts_down is not None
    b, s, hd = h.shape
    t = b * s
    k = config.num_experts_per_tok
    x = h.reshape(t, hd)
    experts, weights = ops.moe_router(
        ops.linear(x, lw.w_router), k, normalize=config.norm_topk_prob
    )
    rows, block_expert = ops.moe_align(
        experts, config.num_experts, block_rows(t * k, config.num_experts)
    )
    a = ops.moe_linear(x, lw.w_experts_gate, rows, block_expert, k, w_up=lw.w_experts_up)
    y = ops.moe_linear(
        a, lw.w_experts_down, rows, block_expert, 1, row_scale=weights.reshape(t * k)
    )
    return ops.sum(y.reshape(t, k, hd), axis=1).reshape(b, s, hd)
