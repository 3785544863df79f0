"""Turning checkpoint tensors (HF names and layouts) into the model's device parameters.

A source is anything with ``tensor_names`` and ``tensor(name) -> np.ndarray`` in HF naming and
layout (a safetensors file or index, or the GGUF reader, which renames and dequantizes). For each
parameter the loader converts the dtype on the host, one tensor at a time (so peak host memory is
one tensor, not the model), and copies it to the device through the pool. q, k and v projections
are concatenated into one ``wqkv`` [(H + 2 Hkv) * head_dim, hidden] so attention does one GEMM
(gpt-fast's layout); GPT-2's Conv1D weights [in, out] are transposed to [out, in].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy
from pygpukit.dtypes import DataType
from pygpukit.models.config import GPT2_SPEC, ModelConfig
from pygpukit.models.errors import ModelLoadError
from pygpukit.runtime import Device

__all__ = ["TensorSource", "LayerWeights", "ModelWeights", "load_weights"]


class TensorSource(Protocol):
    @property
    def tensor_names(self) -> list[str]: ...

    def tensor(self, name: str) -> np.ndarray: ...


@dataclass
class LayerWeights:
    """One transformer block. Linear weights are [out_features, in_features] (torch layout)."""

    attn_norm: GPUArray
    wqkv: GPUArray
    wo: GPUArray
    mlp_norm: GPUArray
    attn_norm_bias: GPUArray | None = None
    bqkv: GPUArray | None = None
    bo: GPUArray | None = None
    q_norm: GPUArray | None = None
    k_norm: GPUArray | None = None
    mlp_norm_bias: GPUArray | None = None
    # gated MLP (Llama/Qwen): down(silu(gate(x)) * up(x))
    w_gate: GPUArray | None = None
    w_up: GPUArray | None = None
    w_down: GPUArray | None = None
    # dense MLP (GPT-2): proj(act(fc(x) + b_fc)) + b_proj
    w_fc: GPUArray | None = None
    b_fc: GPUArray | None = None
    w_proj: GPUArray | None = None
    b_proj: GPUArray | None = None
    # MoE (Mixtral, Qwen3-MoE): router [E, hidden]; the experts stacked, w_experts_gate and
    # w_experts_up [E, I, hidden], w_experts_down [E, hidden, I] (the grouped GEMM's operands)
    w_router: GPUArray | None = None
    w_experts_gate: GPUArray | None = None
    w_experts_up: GPUArray | None = None
    w_experts_down: GPUArray | None = None


@dataclass
class ModelWeights:
    embed_tokens: GPUArray
    final_norm: GPUArray
    lm_head: GPUArray  # the same array as embed_tokens when the embeddings are tied
    layers: list[LayerWeights]
    final_norm_bias: GPUArray | None = None
    pos_embed: GPUArray | None = None  # GPT-2 learned positions


class _Reader:
    """Fetch, check, convert and upload tensors; counts bytes for the progress bar."""

    def __init__(
        self,
        source: TensorSource,
        dtype: DataType,
        device: Device,
        progress: Callable[[int], None] | None,
        where: str,
    ) -> None:
        self.source = source
        self.names = set(source.tensor_names)
        self.dtype = dtype
        self.device = device
        self.progress = progress
        self.where = where

    def has(self, name: str) -> bool:
        return name in self.names

    def host(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        if name not in self.names:
            raise ModelLoadError(f"{self.where}: tensor {name!r} is missing from the checkpoint")
        a = self.source.tensor(name)
        if shape is not None and tuple(a.shape) != shape:
            raise ModelLoadError(
                f"{self.where}: tensor {name!r} has shape {tuple(a.shape)}, the config implies "
                f"{shape}"
            )
        if self.progress is not None:
            self.progress(a.nbytes)
        return a

    def upload(self, a: np.ndarray) -> GPUArray:
        # Conversion happens on the host, one tensor at a time (astype goes through float32 for
        # bfloat16 sources, which is exact), then one copy to the device.
        return from_numpy(
            np.ascontiguousarray(a).astype(self.dtype.np_dtype, copy=False), device=self.device
        )

    def get(self, name: str, shape: tuple[int, ...] | None = None) -> GPUArray:
        return self.upload(self.host(name, shape))

    def opt(self, name: str, shape: tuple[int, ...] | None = None) -> GPUArray | None:
        return self.get(name, shape) if self.has(name) else None


def load_weights(
    source: TensorSource,
    config: ModelConfig,
    dtype: DataType,
    device: Device,
    progress: Callable[[int], None] | None = None,
    where: str = "checkpoint",
) -> ModelWeights:
    r = _Reader(source, dtype, device, progress, where)
    if config.spec is GPT2_SPEC:
        return _load_gpt2(r, config)
    return _load_llama_like(r, config)


def _load_llama_like(r: _Reader, c: ModelConfig) -> ModelWeights:
    hd, d = c.hidden_size, c.head_dim
    q_out, kv_out = c.num_heads * d, c.num_kv_heads * d
    embed = r.get("model.embed_tokens.weight", (c.vocab_size, hd))
    layers = []
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        wqkv = np.concatenate(
            [
                r.host(a + "q_proj.weight", (q_out, hd)),
                r.host(a + "k_proj.weight", (kv_out, hd)),
                r.host(a + "v_proj.weight", (kv_out, hd)),
            ]
        )
        bqkv = None
        if c.attention_bias or r.has(a + "q_proj.bias"):
            bqkv = r.upload(
                np.concatenate(
                    [
                        r.host(a + "q_proj.bias", (q_out,)),
                        r.host(a + "k_proj.bias", (kv_out,)),
                        r.host(a + "v_proj.bias", (kv_out,)),
                    ]
                )
            )
        lw = LayerWeights(
            attn_norm=r.get(p + "input_layernorm.weight", (hd,)),
            wqkv=r.upload(wqkv),
            bqkv=bqkv,
            wo=r.get(a + "o_proj.weight", (hd, q_out)),
            bo=r.opt(a + "o_proj.bias", (hd,)),
            mlp_norm=r.get(p + "post_attention_layernorm.weight", (hd,)),
        )
        if c.spec.qk_norm:
            lw.q_norm = r.get(a + "q_norm.weight", (d,))
            lw.k_norm = r.get(a + "k_norm.weight", (d,))
        if c.is_moe_layer(i):
            _load_experts(r, c, p, lw)
        else:
            lw.w_gate = r.get(p + "mlp.gate_proj.weight", (c.intermediate_size, hd))
            lw.w_up = r.get(p + "mlp.up_proj.weight", (c.intermediate_size, hd))
            lw.w_down = r.get(p + "mlp.down_proj.weight", (hd, c.intermediate_size))
        layers.append(lw)
    final_norm = r.get("model.norm.weight", (hd,))
    if c.tie_word_embeddings:
        lm_head = embed  # tied: HF's tie_weights() makes lm_head the embedding matrix
    elif r.has("lm_head.weight"):
        lm_head = r.get("lm_head.weight", (c.vocab_size, hd))
    else:
        raise ModelLoadError(
            f"{r.where}: tensor 'lm_head.weight' is missing and the config does not tie the "
            "embeddings (tie_word_embeddings is false)"
        )
    return ModelWeights(embed, final_norm, lm_head, layers)


def _load_experts(r: _Reader, c: ModelConfig, p: str, lw: LayerWeights) -> None:
    """A sparse layer's router and experts, stacked [E, ...] on the device, from any of the
    checkpoint layouts: Mixtral's per-expert ``block_sparse_moe.experts.{e}.w1`` (gate) / ``w3``
    (up) / ``w2`` (down) as on the Hub; Qwen3-MoE's per-expert ``mlp.experts.{e}.gate_proj`` /
    ``up_proj`` / ``down_proj``; or the fused 3-D tensors transformers v5 keeps in memory
    (``mlp.experts.gate_up_proj`` [E, 2I, H] with gate first, ``mlp.experts.down_proj``
    [E, H, I]), router ``mlp.gate.weight``. One expert is read at a time into the stacked host
    array, so the host holds one tensor's copy at most."""
    hd, inter, e_n = c.hidden_size, c.expert_intermediate_size, c.num_experts
    gate = np.empty((e_n, inter, hd), dtype=_np_dtype(r))
    up = np.empty_like(gate)
    down = np.empty((e_n, hd, inter), dtype=gate.dtype)
    if r.has(p + "block_sparse_moe.gate.weight"):
        lw.w_router = r.get(p + "block_sparse_moe.gate.weight", (e_n, hd))
        names = (p + "block_sparse_moe.experts.{e}.", "w1", "w3", "w2")
    else:
        lw.w_router = r.get(p + "mlp.gate.weight", (e_n, hd))
        names = (p + "mlp.experts.{e}.", "gate_proj", "up_proj", "down_proj")
    if r.has(p + "mlp.experts.gate_up_proj"):
        gate_up = r.host(p + "mlp.experts.gate_up_proj", (e_n, 2 * inter, hd))
        gate[:], up[:] = gate_up[:, :inter], gate_up[:, inter:]
        down[:] = r.host(p + "mlp.experts.down_proj", (e_n, hd, inter))
    else:
        x, g, u, d = names
        for e in range(e_n):
            pre = x.format(e=e)
            gate[e] = r.host(f"{pre}{g}.weight", (inter, hd))
            up[e] = r.host(f"{pre}{u}.weight", (inter, hd))
            down[e] = r.host(f"{pre}{d}.weight", (hd, inter))
    lw.w_experts_gate, lw.w_experts_up = r.upload(gate), r.upload(up)
    lw.w_experts_down = r.upload(down)


def _np_dtype(r: _Reader) -> np.dtype:
    """The host dtype experts are stacked in: the load dtype (the upload's conversion)."""
    return np.dtype(r.dtype.np_dtype)


def _load_gpt2(r: _Reader, c: ModelConfig) -> ModelWeights:
    hd = c.hidden_size
    # GPT2LMHeadModel prefixes "transformer."; the original Hub checkpoint (GPT2Model) does not.
    pre = "transformer." if r.has("transformer.wte.weight") else ""

    def conv(name: str, in_f: int, out_f: int) -> np.ndarray:
        return np.ascontiguousarray(r.host(name, (in_f, out_f)).T)  # Conv1D stores [in, out]

    embed = r.get(pre + "wte.weight", (c.vocab_size, hd))
    pos = r.get(pre + "wpe.weight", (c.max_position_embeddings, hd))
    layers = []
    for i in range(c.num_layers):
        p = f"{pre}h.{i}."
        layers.append(
            LayerWeights(
                attn_norm=r.get(p + "ln_1.weight", (hd,)),
                attn_norm_bias=r.get(p + "ln_1.bias", (hd,)),
                wqkv=r.upload(conv(p + "attn.c_attn.weight", hd, 3 * hd)),
                bqkv=r.get(p + "attn.c_attn.bias", (3 * hd,)),
                wo=r.upload(conv(p + "attn.c_proj.weight", hd, hd)),
                bo=r.get(p + "attn.c_proj.bias", (hd,)),
                mlp_norm=r.get(p + "ln_2.weight", (hd,)),
                mlp_norm_bias=r.get(p + "ln_2.bias", (hd,)),
                w_fc=r.upload(conv(p + "mlp.c_fc.weight", hd, c.intermediate_size)),
                b_fc=r.get(p + "mlp.c_fc.bias", (c.intermediate_size,)),
                w_proj=r.upload(conv(p + "mlp.c_proj.weight", c.intermediate_size, hd)),
                b_proj=r.get(p + "mlp.c_proj.bias", (hd,)),
            )
        )
    final_norm = r.get(pre + "ln_f.weight", (hd,))
    final_bias = r.get(pre + "ln_f.bias", (hd,))
    lm_head = r.get("lm_head.weight", (c.vocab_size, hd)) if r.has("lm_head.weight") else embed
    if lm_head is not embed and c.tie_word_embeddings:
        lm_head = embed  # HF ties GPT-2's head to wte; a saved copy is the same values
    return ModelWeights(embed, final_norm, lm_head, layers, final_bias, pos)


def total_bytes(source: TensorSource) -> int:
    """Bytes the loader will read (for the progress bar's total)."""
    n = 0
    for name in source.tensor_names:
        info: Any = getattr(source, "tensor_info", None)
        if info is not None:
            dt, shape = info(name)
            n += int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
    return n
