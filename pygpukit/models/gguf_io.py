"""GGUF checkpoints (llama.cpp): metadata, names, dequantization.

The header is read by _gguf_scan.py (checked against the file as it is read). Tensors are
renamed to HF names (the map of llama.cpp's convert_hf_to_gguf.py, reversed). Quantized ones are
either handed over as their blocks (``blocks``: the loader keeps them quantized on the device)
or dequantized at load to float32 by the ``gguf`` package's NumPy reference
(gguf.quants.dequantize, bit for bit llama.cpp's dequantize_row_*): the legacy 32-value blocks
Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the 256-value k-quant super-blocks Q2_K, Q3_K, Q4_K, Q5_K,
Q6_K, which most GGUF files on the hub use (a Q4_K_M file mixes Q4_K and Q6_K). Each row of a
quantized tensor is whole blocks. llama.cpp permutes the rows of q and k of Llama-architecture
models so its rotary kernel can rotate adjacent pairs; the permutation is undone here (as HF's
GGUF loader does), so the model runs the HF rotate_half layout. Any other type raises
UnsupportedModelError naming the tensor and type before anything is loaded. Architectures:
llama (Mixtral when it has experts), qwen2, qwen3 and qwen3moe (Qwen3-MoE: experts stacked in
ffn_*_exps, layers without a router dense).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from pygpukit.models._gguf_scan import TensorInfo, scan
from pygpukit.models.errors import ModelLoadError, UnsupportedModelError

__all__ = ["GGUFSource", "dequantize", "SUPPORTED_TYPES"]

_QUANTIZED = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
SUPPORTED_TYPES = ("F32", "F16", "BF16", *_QUANTIZED)
_ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe")

_LAYER_MAP = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "block_sparse_moe.gate.weight",
}
_EXPERT_MAP = {
    "ffn_gate_exps.weight": "w1",
    "ffn_down_exps.weight": "w2",
    "ffn_up_exps.weight": "w3",
}
# Qwen3-MoE (arch qwen3moe): the router and the experts under HF's Qwen3MoeSparseMoeBlock names.
_QWEN3MOE_ROUTER = "mlp.gate.weight"
_QWEN3MOE_EXPERTS = {
    "ffn_gate_exps.weight": "gate_proj",
    "ffn_down_exps.weight": "down_proj",
    "ffn_up_exps.weight": "up_proj",
}
_GLOBAL_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")


def dequantize(data: np.ndarray, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of one GGUF tensor as a NumPy array of ``shape`` (float32 for quantized types;
    each row of ``shape[-1]`` values is whole blocks)."""
    if type_name == "F32":
        return np.asarray(data).view(np.float32).reshape(shape)
    if type_name == "F16":
        return np.asarray(data).view(np.float16).reshape(shape)
    if type_name == "BF16":
        return np.asarray(data).view(np.uint16).view(ml_dtypes.bfloat16).reshape(shape)
    if type_name not in _QUANTIZED:
        raise UnsupportedModelError(f"GGUF type {type_name} is not supported ({SUPPORTED_TYPES})")
    import gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if not shape or shape[-1] % block:
        raise ValueError(f"{type_name} rows must be whole blocks of {block}, got shape {shape}")
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    # Blocks decode independently: rows of up to 4096 blocks, whatever the tensor's rows (the
    # package decodes a few rows a call, so short rows cost calls).
    per_row = math.gcd(raw.size // size, 4096)
    with np.errstate(all="ignore"):  # a NaN scale in the file gives NaN weights, as in llama.cpp
        vals = gguf.quants.dequantize(raw.reshape(-1, per_row * size), qtype)
    return np.asarray(vals, dtype=np.float32).reshape(shape)


def _type_name(ggml_type: int) -> str:
    import gguf

    try:
        return gguf.GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"unknown type {ggml_type}"


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's LlamaModel.permute (rows of each head interleaved as pairs)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class _Tensor(NamedTuple):
    """One tensor of the file: its name, type, HF-order shape and bytes (a view of the file's
    memory map)."""

    name: str
    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray


class GGUFSource:
    """A GGUF file seen as HF-named tensors plus an HF-style config dict and its metadata."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"{self.path}: GGUF file not found", file=str(self.path))
        head = scan(self.path)  # every count and length checked against the file
        self.meta = head.meta
        if "general.architecture" not in self.meta:
            raise self._error(
                "metadata 'general.architecture' is missing", field="general.architecture"
            )
        self.arch = str(self.meta["general.architecture"])
        if self.arch not in _ARCHS:
            raise UnsupportedModelError(
                f"{self.path}: GGUF architecture {self.arch!r} is not supported "
                f"(supported: {', '.join(_ARCHS)})"
            )
        self.file_size = self.path.stat().st_size
        names = {t.ggml_type: _type_name(t.ggml_type) for t in head.tensors}
        bad = [f"{t.name} ({names[t.ggml_type]})" for t in head.tensors
               if names[t.ggml_type] not in SUPPORTED_TYPES]  # fmt: skip
        if bad:
            raise UnsupportedModelError(
                f"{self.path}: unsupported quantization in {len(bad)} tensors, e.g. "
                f"{', '.join(bad[:3])}; supported types: {', '.join(SUPPORTED_TYPES)}"
            )
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r")  # the file holds a header
        self._tensors: dict[str, _Tensor] = {}
        for t in head.tensors:
            if t.name in self._tensors:
                raise self._error(f"tensor {t.name!r} appears twice", t.name, "name")
            self._tensors[t.name] = self._checked(t, names[t.ggml_type], head.data_start)
        self._names: dict[str, tuple[str, int | None]] = {}
        n_exp = self.meta_int(f"{self.arch}.expert_count", 0)
        for name in self._tensors:
            if name in _GLOBAL_MAP:
                self._names[_GLOBAL_MAP[name]] = (name, None)
                continue
            m = _BLK.match(name)
            if m is None:
                continue  # e.g. rope_freqs.weight, read through config_dict()
            i, rest = m.group(1), m.group(2)
            qwen3moe = self.arch == "qwen3moe"
            if rest == "ffn_gate_inp.weight" and qwen3moe:
                self._names[f"model.layers.{i}.{_QWEN3MOE_ROUTER}"] = (name, None)
            elif rest in _LAYER_MAP:
                self._names[f"model.layers.{i}.{_LAYER_MAP[rest]}"] = (name, None)
            elif rest in _EXPERT_MAP:
                for e in range(n_exp):
                    hf = (
                        f"model.layers.{i}.mlp.experts.{e}.{_QWEN3MOE_EXPERTS[rest]}.weight"
                        if qwen3moe
                        else f"model.layers.{i}.block_sparse_moe.experts.{e}."
                        f"{_EXPERT_MAP[rest]}.weight"
                    )
                    self._names[hf] = (name, e)

    def _error(self, what: str, tensor: str | None = None, field: str | None = None) -> Exception:
        return ModelLoadError(
            f"{self.path}: {what}", file=str(self.path), tensor=tensor, field=field
        )

    def _checked(self, t: TensorInfo, type_name: str, data_start: int) -> _Tensor:
        """Its byte count from shape and type (Python ints: no wrap-around) against the file's
        size, so no later view reads past the file."""
        import gguf

        dims = list(t.dims)
        if any(d <= 0 for d in dims):
            raise self._error(f"tensor {t.name!r} has shape {dims}", t.name, "shape")
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t.ggml_type)]
        n = math.prod(dims)
        if dims[0] % block:  # rows of whole blocks (ggml's rule; n follows)
            raise self._error(
                f"tensor {t.name!r} has rows of {dims[0]} values, not a multiple of "
                f"{type_name}'s block of {block}",
                t.name,
                "shape",
            )
        nbytes = n // block * size
        start = data_start + t.offset
        end = start + nbytes
        if end > self.file_size:
            raise self._error(
                f"truncated GGUF file: tensor {t.name!r} ({type_name}{dims}) needs "
                f"{nbytes} bytes ending at byte {end}, the file has {self.file_size} bytes",
                t.name,
                "data_offset",
            )
        return _Tensor(t.name, type_name, tuple(reversed(dims)), self._map[start:end])

    @property
    def total_bytes(self) -> int:
        """Bytes of tensor data in the file."""
        return sum(int(t.data.nbytes) for t in self._tensors.values())

    def meta_int(self, key: str, default: int | None = None) -> int:
        """Integer metadata ``key`` (``default`` when absent; ModelLoadError naming the key
        when it is missing without a default or is not a non-negative integer)."""
        v = self.meta.get(key)
        if v is None:
            if default is None:
                raise self._error(f"metadata {key!r} is missing", field=key)
            return default
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise self._error(
                f"metadata {key!r} must be a non-negative integer, got {v!r}", field=key
            )
        return int(v)

    def meta_float(self, key: str, default: float | None = None) -> float:
        v = self.meta.get(key)
        if v is None:
            if default is None:
                raise self._error(f"metadata {key!r} is missing", field=key)
            return default
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float, np.number))
            or not math.isfinite(v)
        ):
            raise self._error(f"metadata {key!r} must be a finite number, got {v!r}", field=key)
        return float(v)

    @property
    def tensor_names(self) -> list[str]:
        return list(self._names)

    def _raw(self, gguf_name: str) -> np.ndarray:
        t = self._tensors[gguf_name]
        return dequantize(t.data, t.type_name, t.shape)

    def tensor(self, name: str) -> np.ndarray:
        try:
            gname, expert = self._names[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor maps to {name!r}") from None
        if expert is not None:
            t = self._tensors[gname]
            data = t.data.reshape(t.shape[0], -1)[expert]  # one expert's bytes
            w = dequantize(data, t.type_name, t.shape[1:])
        else:
            w = self._raw(gname)
        if self.arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            key = "head_count" if name.endswith("q_proj.weight") else "head_count_kv"
            n_head = self.meta_int(f"llama.attention.{key}")
            w = _unpermute(np.asarray(w), n_head)
        return w

    def blocks(self, name: str) -> tuple[str, np.ndarray] | None:
        """(format, uint8 [N, row bytes]) for a 2-D tensor stored in a block format the GGUF
        kernels read (pygpukit.qweight.GGUF_BLOCKS: every quantized type here), rows in HF order
        (q/k un-permuted); None for float tensors and the experts' 3-D tensors."""
        from pygpukit.qweight import GGUF_BLOCKS

        gname, expert = self._names[name]
        t = self._tensors[gname]
        fmt = t.type_name.lower()
        if expert is not None or fmt not in GGUF_BLOCKS or len(t.shape) != 2:
            return None
        raw = np.asarray(t.data).reshape(t.shape[0], -1)
        if self.arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            key = "head_count" if name.endswith("q_proj.weight") else "head_count_kv"
            raw = _unpermute(raw, self.meta_int(f"llama.attention.{key}"))  # rows only
        return fmt, raw

    def expert_blocks(self, name: str) -> tuple[str, int, np.ndarray] | None:
        """(format, E, uint8 [E * N, row bytes]): all experts of the 3-D tensor that the
        per-expert HF name ``name`` (any expert's) maps to, when it is stored in a block format
        the GGUF kernels read; None otherwise."""
        from pygpukit.qweight import GGUF_BLOCKS

        gname, expert = self._names[name]
        t = self._tensors[gname]
        fmt = t.type_name.lower()
        if expert is None or fmt not in GGUF_BLOCKS or len(t.shape) != 3:
            return None
        e, n = t.shape[0], t.shape[1]
        return fmt, e, np.asarray(t.data).reshape(e * n, -1)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        """The HF-order shape of a tensor (of one expert for the experts' tensors)."""
        gname, expert = self._names[name]
        shape = self._tensors[gname].shape
        return shape[1:] if expert is not None else shape

    def _qwen3moe_fields(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """Qwen3MoeConfig's fields from a qwen3moe file: the experts' width
        (``expert_feed_forward_length``), the layers without a router as mlp_only_layers, and
        norm_topk_prob from ``expert_weights_norm`` when the file states it, else true
        (llama.cpp's qwen3moe graph always renormalises the top-k weights and its converter
        writes no such key, as the released Qwen3-MoE configs renormalise)."""
        a = self.arch
        layers = cfg["num_hidden_layers"]
        norm = self.meta.get(f"{a}.expert_weights_norm", True)
        if not isinstance(norm, (bool, np.bool_)):
            raise self._error(
                f"metadata '{a}.expert_weights_norm' must be a bool, got {norm!r}",
                field=f"{a}.expert_weights_norm",
            )
        moe = self.meta_int(f"{a}.expert_feed_forward_length", 0)
        if not moe:  # llama.cpp reads it as optional: the experts' tensor has the width
            gate = next(
                (t for n, t in self._tensors.items() if n.endswith("ffn_gate_exps.weight")), None
            )
            if gate is None or len(gate.shape) != 3:
                raise self._error(
                    f"metadata '{a}.expert_feed_forward_length' is missing and no 3-D "
                    "ffn_gate_exps tensor gives the experts' width",
                    field=f"{a}.expert_feed_forward_length",
                )
            moe = gate.shape[1]
        return {
            "model_type": "qwen3_moe",
            "moe_intermediate_size": moe,
            "intermediate_size": cfg["intermediate_size"] or moe,
            "mlp_only_layers": [
                i for i in range(layers) if f"blk.{i}.ffn_gate_inp.weight" not in self._tensors
            ],
            "norm_topk_prob": bool(norm),
        }

    def config_dict(self) -> dict[str, Any]:
        """config.json fields from the ``<arch>.*`` metadata (llama.cpp's names, reversed)."""
        a, m = self.arch, self.meta
        hidden = self.meta_int(f"{a}.embedding_length")
        heads = self.meta_int(f"{a}.attention.head_count")
        if hidden == 0 or heads == 0:
            raise self._error(
                f"metadata '{a}.embedding_length' ({hidden}) and '{a}.attention.head_count' "
                f"({heads}) must be positive",
                field=f"{a}.attention.head_count",
            )
        n_exp = self.meta_int(f"{a}.expert_count", 0)
        vocab = self.meta_int(f"{a}.vocab_size", 0) or len(m.get("tokenizer.ggml.tokens", []))
        cfg: dict[str, Any] = {
            "model_type": "mixtral" if (a == "llama" and n_exp) else a,
            "hidden_size": hidden,
            "num_hidden_layers": self.meta_int(f"{a}.block_count"),
            "num_attention_heads": heads,
            "num_key_value_heads": self.meta_int(f"{a}.attention.head_count_kv", heads),
            "head_dim": self.meta_int(f"{a}.attention.key_length", hidden // heads),
            "intermediate_size": self.meta_int(
                f"{a}.feed_forward_length", 0 if a == "qwen3moe" else None
            ),
            "max_position_embeddings": self.meta_int(f"{a}.context_length"),
            "rms_norm_eps": self.meta_float(f"{a}.attention.layer_norm_rms_epsilon"),
            "rope_theta": self.meta_float(f"{a}.rope.freq_base", 10000.0),
            "vocab_size": vocab,
            "tie_word_embeddings": "output.weight" not in self._tensors,
            "bos_token_id": m.get("tokenizer.ggml.bos_token_id"),
            "eos_token_id": m.get("tokenizer.ggml.eos_token_id"),
        }
        if n_exp:
            cfg["num_local_experts"] = n_exp
            cfg["num_experts_per_tok"] = self.meta_int(f"{a}.expert_used_count")
        if a == "qwen3moe":
            cfg |= self._qwen3moe_fields(cfg)
        if "rope_freqs.weight" in self._tensors:
            # Llama 3.1+ GGUFs store the llama3 frequency divisors as a tensor instead of the
            # rope_scaling parameters.
            cfg["rope_freq_factors"] = np.asarray(self._raw("rope_freqs.weight"), np.float64)
        return cfg
