"""Turning checkpoint tensors (HF names and layouts) into the model's device parameters.

A source is anything with ``tensor_names`` and ``tensor(name) -> np.ndarray`` in HF naming and
layout (a safetensors file or index, or the GGUF reader, which renames and dequantizes). For each
parameter the loader converts the dtype on the host, one tensor at a time (so peak host memory is
one tensor, not the model), and copies it to the device through the pool. q, k and v projections
are concatenated into one ``wqkv`` [(H + 2 Hkv) * head_dim, hidden] so attention does one GEMM
(gpt-fast's layout), and a gated MLP's gate and up projections into one ``w_gate_up``
[2 * intermediate, hidden] (gp.linear_silu_mul: one product, or one fused GEMV at decode);
GPT-2's Conv1D weights [in, out] are transposed to [out, in].

Linear weights may stay quantized (``quantize``): "stored" keeps a GGUF file's block formats as
stored (q8_0 ... q6_k, q2_k, q3_k; the kernels of pygpukit/ops/gguf.py read them in place, and the
rows of a quantized embedding table are dequantized as they are looked up); "dequantize" expands
them to the model dtype at load; None picks "stored" on a CUDA device and "dequantize" on the CPU
device (where the NumPy reference would expand every weight again on every product); "fp8", "int4",
"nvfp4" and "w8a8" quantize every dense linear weight at load with gp.quantize_weight (the
embedding table stays dense, and so does a head tied to it).
A GGUF file's MoE experts stay quantized too ("stored"; gp.moe_linear reads them as E stacked
matrices) when gate, up and down are all in block formats and gate and up share one; otherwise
all three are expanded. Kept experts trade speed for memory (about 0.7x the dense experts for a
decode token, 0.2x for prefill on an H100; BENCHMARKS.md): "dequantize" is faster where the
dense experts fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy
from pygpukit.dtypes import DataType
from pygpukit.models._linear import Weight, weight_bytes
from pygpukit.models.config import GPT2_SPEC, ModelConfig
from pygpukit.models.errors import ModelLoadError
from pygpukit.qweight import FORMATS, QuantizedWeight, quantize_weight
from pygpukit.runtime import Device

__all__ = ["TensorSource", "LayerWeights", "ModelWeights", "load_weights", "QUANTIZE_MODES"]

# load_model's quantize= (module docstring).
QUANTIZE_MODES = (None, "stored", "dequantize", *FORMATS)


class TensorSource(Protocol):
    @property
    def tensor_names(self) -> list[str]: ...

    def tensor(self, name: str) -> np.ndarray: ...


@dataclass
class LayerWeights:
    """One transformer block. Linear weights are [out_features, in_features] (torch layout)."""

    attn_norm: GPUArray
    wqkv: Weight
    wo: Weight
    mlp_norm: GPUArray
    attn_norm_bias: GPUArray | None = None
    bqkv: GPUArray | None = None
    bo: GPUArray | None = None
    q_norm: GPUArray | None = None
    k_norm: GPUArray | None = None
    mlp_norm_bias: GPUArray | None = None
    # gated MLP (Llama/Qwen): down(silu(gate(x)) * up(x)); gate and up stacked by rows
    w_gate_up: Weight | None = None
    w_down: Weight | None = None
    # dense MLP (GPT-2): proj(act(fc(x) + b_fc)) + b_proj
    w_fc: GPUArray | None = None
    b_fc: GPUArray | None = None
    w_proj: GPUArray | None = None
    b_proj: GPUArray | None = None
    # MoE (Mixtral, Qwen3-MoE): router [E, hidden]; the experts stacked, w_experts_gate and
    # w_experts_up [E, I, hidden], w_experts_down [E, hidden, I] (the grouped GEMM's operands)
    w_router: GPUArray | None = None
    w_experts_gate: GPUArray | QuantizedWeight | None = None
    w_experts_up: GPUArray | QuantizedWeight | None = None
    w_experts_down: GPUArray | QuantizedWeight | None = None


@dataclass
class ModelWeights:
    embed_tokens: GPUArray | QuantizedWeight
    final_norm: GPUArray
    lm_head: Weight  # the same object as embed_tokens when the embeddings are tied
    layers: list[LayerWeights]
    final_norm_bias: GPUArray | None = None
    pos_embed: GPUArray | None = None  # GPT-2 learned positions

    def _parts(self) -> list[Any]:
        """Every parameter once (a tied head is the embedding table itself)."""
        seen: list[Any] = []
        objs: list[Any] = [self.embed_tokens, self.final_norm, self.lm_head]
        objs += [self.final_norm_bias, self.pos_embed]
        for lw in self.layers:
            objs += list(vars(lw).values())
        for o in objs:
            if o is not None and not any(o is x for x in seen):
                seen.append(o)
        return seen

    def nbytes(self) -> int:
        """Device bytes of the parameters (quantized ones as stored)."""
        return sum(weight_bytes(o) for o in self._parts())

    def formats(self) -> dict[str, int]:
        """Bytes by storage format: dtype names for dense arrays, quantized formats by name."""
        out: dict[str, int] = {}
        for o in self._parts():
            for w in o if isinstance(o, tuple) else (o,):
                key = w.format if isinstance(w, QuantizedWeight) else w.dtype.name
                out[key] = out.get(key, 0) + weight_bytes(w)
        return out


class _Reader:
    """Fetch, check, convert and upload tensors; counts bytes for the progress bar."""

    def __init__(
        self,
        source: TensorSource,
        dtype: DataType,
        device: Device,
        progress: Callable[[int], None] | None,
        where: str,
        quantize: str | None = None,
    ) -> None:
        self.quantize = quantize
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

    def _blocks(self, name: str, shape: tuple[int, int]) -> tuple[str, np.ndarray] | None:
        """A GGUF tensor's blocks when they are kept as stored, checked against ``shape``."""
        blocks = getattr(self.source, "blocks", None)
        if self.quantize != "stored" or blocks is None or name not in self.names:
            return None
        got = blocks(name)
        if got is None:
            return None
        fmt, raw = got
        from pygpukit.qweight import GGUF_BLOCKS

        qk, bb = GGUF_BLOCKS[fmt]
        have = (raw.shape[0], raw.shape[1] // bb * qk)
        if have != shape:
            raise ModelLoadError(
                f"{self.where}: tensor {name!r} has shape {have}, the config implies {shape}"
            )
        if self.progress is not None:
            self.progress(raw.nbytes)
        return fmt, raw

    def _quantized(self, fmt: str, raw: np.ndarray) -> QuantizedWeight:
        return QuantizedWeight.from_blocks(fmt, raw, device=self.device)

    def _dense_linear(self, w: np.ndarray, name: str) -> Weight:
        if self.quantize in FORMATS:
            try:
                return quantize_weight(w, self.quantize, device=self.device)
            except ValueError as e:
                raise ModelLoadError(f"{self.where}: {name}: {e}") from None
        return self.upload(w)

    def linear(self, name: str, shape: tuple[int, int]) -> Weight:
        """A linear weight [out, in]: blocks kept, quantized at load, or dense."""
        got = self._blocks(name, shape)
        if got is not None:
            return self._quantized(*got)
        return self._dense_linear(self.host(name, shape), name)

    def stacked(self, parts: list[tuple[str, tuple[int, int]]], label: str) -> Weight:
        """Linear weights stacked by rows (q, k, v into wqkv): one array or QuantizedWeight,
        or a tuple of QuantizedWeights when a GGUF file stores them in different formats."""
        got = [self._blocks(n, sh) for n, sh in parts]
        if all(g is not None for g in got):
            blocks = [g for g in got if g is not None]
            if len({fmt for fmt, _ in blocks}) == 1:
                return self._quantized(blocks[0][0], np.concatenate([r for _, r in blocks]))
            return tuple(self._quantized(*g) for g in blocks)
        dense = [
            self.source.tensor(n) if g is not None else self.host(n, sh)
            for (n, sh), g in zip(parts, got, strict=True)
        ]
        return self._dense_linear(np.concatenate(dense), label)

    def table(self, name: str, shape: tuple[int, int]) -> GPUArray | QuantizedWeight:
        """The embedding table: GGUF blocks kept as stored, else dense in the model dtype."""
        got = self._blocks(name, shape)
        return self._quantized(*got) if got is not None else self.get(name, shape)


def load_weights(
    source: TensorSource,
    config: ModelConfig,
    dtype: DataType,
    device: Device,
    progress: Callable[[int], None] | None = None,
    where: str = "checkpoint",
    quantize: str | None = None,
) -> ModelWeights:
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {quantize!r}")
    if quantize in FORMATS and dtype.name not in ("float16", "bfloat16"):
        raise ValueError(
            f"quantize={quantize!r} needs a float16 or bfloat16 model (its products take half "
            f"activations), got dtype {dtype.name}"
        )
    if quantize is None:
        quantize = "stored" if device.type != "cpu" else "dequantize"
    r = _Reader(source, dtype, device, progress, where, quantize)
    if config.spec is GPT2_SPEC:
        if quantize in FORMATS:
            raise ValueError(
                f"quantize={quantize!r}: quantizing at load serves the Llama-like architectures "
                "(GPT-2's fused activation runs in gp.linear's epilogue)"
            )
        return _load_gpt2(r, config)
    return _load_llama_like(r, config)


def _load_llama_like(r: _Reader, c: ModelConfig) -> ModelWeights:
    hd, d = c.hidden_size, c.head_dim
    q_out, kv_out = c.num_heads * d, c.num_kv_heads * d
    embed = r.table("model.embed_tokens.weight", (c.vocab_size, hd))
    layers = []
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        wqkv = r.stacked(
            [
                (a + "q_proj.weight", (q_out, hd)),
                (a + "k_proj.weight", (kv_out, hd)),
                (a + "v_proj.weight", (kv_out, hd)),
            ],
            a + "qkv",
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
            wqkv=wqkv,
            bqkv=bqkv,
            wo=r.linear(a + "o_proj.weight", (hd, q_out)),
            bo=r.opt(a + "o_proj.bias", (hd,)),
            mlp_norm=r.get(p + "post_attention_layernorm.weight", (hd,)),
        )
        if c.spec.qk_norm:
            lw.q_norm = r.get(a + "q_norm.weight", (d,))
            lw.k_norm = r.get(a + "k_norm.weight", (d,))
        if c.is_moe_layer(i):
            _load_experts(r, c, p, lw)
        else:
            # Quantized at load, the stack is one matrix: per-row and per-group scales are
            # those of each half alone; nvfp4's one global scale covers both halves.
            lw.w_gate_up = r.stacked(
                [
                    (p + "mlp.gate_proj.weight", (c.intermediate_size, hd)),
                    (p + "mlp.up_proj.weight", (c.intermediate_size, hd)),
                ],
                p + "mlp.gate_up",
            )
            lw.w_down = r.linear(p + "mlp.down_proj.weight", (hd, c.intermediate_size))
        layers.append(lw)
    final_norm = r.get("model.norm.weight", (hd,))
    lm_head: Weight
    if c.tie_word_embeddings:
        lm_head = embed  # tied: HF's tie_weights() makes lm_head the embedding matrix
    elif r.has("lm_head.weight"):
        lm_head = r.linear("lm_head.weight", (c.vocab_size, hd))
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
    if r.has(p + "block_sparse_moe.gate.weight"):
        lw.w_router = r.get(p + "block_sparse_moe.gate.weight", (e_n, hd))
        names = (p + "block_sparse_moe.experts.{e}.", "w1", "w3", "w2")
    else:
        lw.w_router = r.get(p + "mlp.gate.weight", (e_n, hd))
        names = (p + "mlp.experts.{e}.", "gate_proj", "up_proj", "down_proj")
    if _kept_experts(r, c, names, lw):
        return
    gate = np.empty((e_n, inter, hd), dtype=_np_dtype(r))
    up = np.empty_like(gate)
    down = np.empty((e_n, hd, inter), dtype=gate.dtype)
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


def _kept_experts(r: _Reader, c: ModelConfig, names: tuple[str, ...], lw: LayerWeights) -> bool:
    """With quantize="stored", a GGUF file's expert tensors stay in their block format as one
    QuantizedWeight of E stacked matrices each (gate and up must share a format, the grouped
    product reads them together); False when they are to be expanded instead."""
    source: Any = r.source
    get = getattr(source, "expert_blocks", None)
    if r.quantize != "stored" or get is None:
        return False
    x, g, u, d = names
    first = x.format(e=0)
    if not all(r.has(f"{first}{m}.weight") for m in (g, u, d)):
        return False
    got = [get(f"{first}{m}.weight") for m in (g, u, d)]
    if any(v is None for v in got) or got[0][0] != got[1][0]:
        return False
    hd, inter, e_n = c.hidden_size, c.expert_intermediate_size, c.num_experts
    want = ((e_n, inter, hd), (e_n, inter, hd), (e_n, hd, inter))
    from pygpukit.qweight import GGUF_BLOCKS

    for (fmt, e, raw), shape, m in zip(got, want, (g, u, d), strict=True):
        qk, bb = GGUF_BLOCKS[fmt]
        have = (e, raw.shape[0] // max(e, 1), raw.shape[1] // bb * qk)
        if have != shape:
            raise ModelLoadError(
                f"{r.where}: experts {first}{m}.weight have shape {have}, the config implies "
                f"{shape}"
            )
    made = []
    for fmt, e, raw in got:
        if r.progress is not None:
            r.progress(raw.nbytes)
        made.append(QuantizedWeight.from_blocks(fmt, raw, device=r.device, experts=e))
    lw.w_experts_gate, lw.w_experts_up, lw.w_experts_down = made
    return True


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
