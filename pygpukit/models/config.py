"""Model specs (one per architecture family) and the dimensions read from config.json.

A ModelSpec says how a family is built (norm, MLP, positions, biases, q/k norm, MoE) and how its
checkpoint names its tensors; a ModelConfig holds one checkpoint's sizes. The family comes from
config.json's ``model_type`` (never guessed from tensor shapes); ``detect_model_spec`` (from tensor
names) is a convenience of the 0.2.x API. Field meanings follow the HF configuration classes
(transformers/models/<family>/configuration_<family>.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygpukit.models.errors import ModelLoadError, UnsupportedModelError
from pygpukit.ops.moe import MAX_EXPERTS

__all__ = [
    "ModelSpec",
    "ModelConfig",
    "GPT2_SPEC",
    "LLAMA_SPEC",
    "QWEN2_SPEC",
    "QWEN3_SPEC",
    "MIXTRAL_SPEC",
    "QWEN3_MOE_SPEC",
    "SPECS",
    "detect_model_spec",
    "spec_for_model_type",
    "config_from_dict",
    "read_config",
]


@dataclass(frozen=True)
class ModelSpec:
    """How one architecture family is assembled from ops.

    norm: "rmsnorm" or "layernorm" (with bias); mlp: "gated" (silu(x W_gate^T) * x W_up^T, then
    W_down), "dense" (activation(x W_fc^T + b) W_proj^T + b, GPT-2) or "moe" (Mixtral, Qwen3-MoE:
    a router and gated experts, pygpukit/models/moe.py);
    position: "rope" or "learned"; qkv_bias: the q/k/v projections always carry a bias (Qwen2);
    qk_norm: RMSNorm over head_dim on q and k before RoPE (Qwen3); conv1d: the checkpoint stores
    linear weights [in, out] (GPT-2 Conv1D) rather than [out, in].
    """

    name: str
    model_types: tuple[str, ...]
    norm: str = "rmsnorm"
    mlp: str = "gated"
    position: str = "rope"
    qkv_bias: bool = False
    qk_norm: bool = False
    conv1d: bool = False
    marker: str = ""  # a tensor-name fragment only this family's checkpoints contain

    @property
    def moe(self) -> bool:
        return self.mlp == "moe"


GPT2_SPEC = ModelSpec(
    "gpt2",
    ("gpt2",),
    norm="layernorm",
    mlp="dense",
    position="learned",
    qkv_bias=True,
    conv1d=True,
    marker="attn.c_attn.weight",
)
LLAMA_SPEC = ModelSpec("llama", ("llama",), marker="self_attn.q_proj.weight")
QWEN2_SPEC = ModelSpec("qwen2", ("qwen2",), qkv_bias=True, marker="self_attn.q_proj.bias")
QWEN3_SPEC = ModelSpec("qwen3", ("qwen3",), qk_norm=True, marker="self_attn.q_norm.weight")
MIXTRAL_SPEC = ModelSpec("mixtral", ("mixtral",), mlp="moe", marker="block_sparse_moe.gate.weight")
QWEN3_MOE_SPEC = ModelSpec(
    "qwen3_moe", ("qwen3_moe",), mlp="moe", qk_norm=True, marker="mlp.experts.0.gate_proj.weight"
)

SPECS: tuple[ModelSpec, ...] = (
    GPT2_SPEC,
    LLAMA_SPEC,
    QWEN2_SPEC,
    QWEN3_SPEC,
    MIXTRAL_SPEC,
    QWEN3_MOE_SPEC,
)


def spec_for_model_type(model_type: str) -> ModelSpec:
    for spec in SPECS:
        if model_type in spec.model_types:
            return spec
    known = ", ".join(t for s in SPECS for t in s.model_types)
    raise UnsupportedModelError(
        f"unknown architecture: model_type {model_type!r} is not supported (supported: {known})"
    )


def detect_model_spec(tensor_names: Any) -> ModelSpec:
    """The family whose checkpoint naming matches ``tensor_names`` (0.2.x convenience).

    The loader itself reads config.json; this only looks at names, most specific first (a Qwen3
    checkpoint also has Llama's q_proj names, a Mixtral one has Llama's attention names).
    """
    names = list(tensor_names)
    for spec in (QWEN3_MOE_SPEC, MIXTRAL_SPEC, QWEN3_SPEC, QWEN2_SPEC, GPT2_SPEC, LLAMA_SPEC):
        if any(spec.marker in n for n in names):
            return spec
    sample = ", ".join(names[:5])
    raise UnsupportedModelError(
        f"cannot detect the architecture from {len(names)} tensor names (first: {sample}); "
        "supported families: " + ", ".join(s.name for s in SPECS)
    )


@dataclass(frozen=True)
class ModelConfig:
    """One checkpoint's sizes and numerics (names follow the math: num_kv_heads, head_dim)."""

    spec: ModelSpec
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    max_position_embeddings: int
    norm_eps: float
    activation: str = "silu"
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    attn_scale: float | None = None  # None: 1/sqrt(head_dim)
    scale_attn_by_inverse_layer_idx: bool = False  # GPT-2 option
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # each expert's; 0: intermediate_size (Mixtral)
    norm_topk_prob: bool = True  # renormalise the top-k router probabilities to sum 1
    dense_layers: frozenset[int] = frozenset()  # MoE models' layers with a dense gated MLP
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def max_context(self) -> int:
        """Longest sequence this engine runs exactly: the position limit, and the sliding window
        when there is one (within the window sliding-window attention equals full attention)."""
        if self.sliding_window:
            return min(self.max_position_embeddings, self.sliding_window)
        return self.max_position_embeddings

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    def is_moe_layer(self, layer: int) -> bool:
        return self.spec.moe and layer not in self.dense_layers

    def layer_attn_scale(self, layer: int) -> float:
        scale = self.attn_scale if self.attn_scale is not None else 1.0 / math.sqrt(self.head_dim)
        if self.scale_attn_by_inverse_layer_idx:
            scale /= float(layer + 1)  # HF GPT2Attention: attn_weights / float(layer_idx + 1)
        return scale


def _need(cfg: dict[str, Any], *keys: str, source: str) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    raise ModelLoadError(
        f"{source}: missing field {' / '.join(repr(k) for k in keys)}", file=source, field=keys[0]
    )


def _int(cfg: dict[str, Any], *keys: str, source: str) -> int:
    v = _need(cfg, *keys, source=source)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _bad(source, keys[0], "a positive integer", v)
    return v


def _bad(source: str, key: str, want: str, v: Any) -> ModelLoadError:
    return ModelLoadError(
        f"{source}: field {key!r} must be {want}, got {v!r}", file=source, field=key
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_int(cfg: dict[str, Any], key: str, default: Any, source: str, low: int = 1) -> Any:
    """cfg[key] as an int >= low; ``default`` when absent or null (JSON's null means unset)."""
    v = cfg.get(key)
    if v is None:
        return default
    if not _is_int(v) or v < low:
        raise _bad(source, key, f"an integer >= {low}", v)
    return v


def _opt_float(cfg: dict[str, Any], key: str, default: float, source: str) -> float:
    """cfg[key] as a finite positive float (eps, theta); ``default`` when absent or null."""
    v = cfg.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
        raise _bad(source, key, "a positive finite number", v)
    return float(v)


def _opt_bool(cfg: dict[str, Any], key: str, default: bool, source: str) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):  # bool("false") is True: a string here is a mistake
        raise _bad(source, key, "true or false", v)
    return v


def _eos(cfg: dict[str, Any], source: str = "config.json") -> tuple[int, ...]:
    v = cfg.get("eos_token_id")
    if v is None:
        return ()
    ids = v if isinstance(v, (list, tuple)) else [v]
    if not all(_is_int(x) and x >= 0 for x in ids):
        raise _bad(source, "eos_token_id", "a token id or a list of token ids", v)
    return tuple(ids)


def _rope(cfg: dict[str, Any], source: str) -> tuple[float, dict[str, Any] | None]:
    """rope_theta and the scaling dict. transformers v5 writes both into ``rope_parameters``;
    older configs have ``rope_theta`` and ``rope_scaling``. Only llama3 scaling is implemented
    (modeling_rope_utils._compute_llama3_parameters); other scalings change the math, so they
    are refused rather than ignored."""
    params = cfg.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise _bad(source, "rope_parameters", "an object", params)
    theta = _opt_float(cfg, "rope_theta", _opt_float(params, "rope_theta", 10000.0, source), source)
    scaling = cfg.get("rope_scaling") or params or None
    if scaling is not None and not isinstance(scaling, dict):
        raise _bad(source, "rope_scaling", "an object", scaling)
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if kind in (None, "default"):
            scaling = None
        elif kind != "llama3":
            raise UnsupportedModelError(
                f"{source}: rope scaling {kind!r} is not supported (only llama3 scaling)"
            )
    return float(theta), scaling


def config_from_dict(cfg: dict[str, Any], source: str = "config.json") -> ModelConfig:
    """A ModelConfig from a parsed config.json (HF transformers layout)."""
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{source}: expected a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if not model_type:
        raise ModelLoadError(f"{source}: missing field 'model_type' (cannot tell the architecture)")
    spec = spec_for_model_type(str(model_type))
    if spec is GPT2_SPEC:
        return _gpt2_config(cfg, source)
    hidden = _int(cfg, "hidden_size", source=source)
    heads = _int(cfg, "num_attention_heads", source=source)
    kv_heads = _opt_int(cfg, "num_key_value_heads", heads, source)
    if heads % kv_heads:
        raise ModelLoadError(
            f"{source}: num_attention_heads {heads} is not a multiple of "
            f"num_key_value_heads {kv_heads}"
        )
    head_dim = _opt_int(cfg, "head_dim", hidden // heads, source)
    if head_dim < 1:
        raise _bad(source, "num_attention_heads", f"at most hidden_size ({hidden})", heads)
    theta, scaling = _rope(cfg, source)
    if cfg.get("mlp_bias"):
        raise UnsupportedModelError(f"{source}: mlp_bias=true is not supported")
    act = cfg.get("hidden_act", "silu")
    if not isinstance(act, str) or act not in ("silu", "swish"):
        raise UnsupportedModelError(f"{source}: hidden_act {act!r} is not supported (only silu)")
    window = cfg.get("sliding_window")
    moe = _moe_fields(cfg, spec, source) if spec.moe else {}
    if spec is QWEN2_SPEC or spec is QWEN3_SPEC or spec is QWEN3_MOE_SPEC:
        # Qwen2/3 configs carry a sliding_window that is only used with use_sliding_window=true.
        window = window if cfg.get("use_sliding_window") else None
    return ModelConfig(
        spec=spec,
        vocab_size=_int(cfg, "vocab_size", source=source),
        hidden_size=hidden,
        num_layers=_int(cfg, "num_hidden_layers", source=source),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=_int(cfg, "intermediate_size", source=source),
        max_position_embeddings=_int(cfg, "max_position_embeddings", source=source),
        norm_eps=_opt_float(cfg, "rms_norm_eps", 1e-6, source),
        activation="silu",
        rope_theta=theta,
        rope_scaling=scaling,
        tie_word_embeddings=_opt_bool(cfg, "tie_word_embeddings", False, source),
        attention_bias=spec.qkv_bias or _opt_bool(cfg, "attention_bias", False, source),
        **moe,
        sliding_window=_opt_int({"sliding_window": window}, "sliding_window", None, source, 0)
        or None,
        bos_token_id=_opt_int(cfg, "bos_token_id", None, source, 0),
        eos_token_ids=_eos(cfg, source),
        extra={"model_type": model_type, "rope_freq_factors": cfg.get("rope_freq_factors")},
    )


def _moe_fields(cfg: dict[str, Any], spec: ModelSpec, source: str) -> dict[str, Any]:
    """The router and expert sizes (HF MixtralConfig / Qwen3MoeConfig). Qwen3-MoE's layer i is
    sparse unless listed in mlp_only_layers, and only when (i + 1) % decoder_sparse_step == 0
    (Qwen3MoeDecoderLayer); Mixtral's layers are all sparse and always renormalise."""
    experts = _int(cfg, "num_local_experts", "num_experts", source=source)
    if experts > MAX_EXPERTS:
        raise _bad(source, "num_experts", f"at most {MAX_EXPERTS} (the router's limit)", experts)
    top_k = _int(cfg, "num_experts_per_tok", source=source)
    if top_k > experts:
        raise _bad(source, "num_experts_per_tok", f"at most the expert count ({experts})", top_k)
    fields: dict[str, Any] = {"num_experts": experts, "num_experts_per_tok": top_k}
    if spec is QWEN3_MOE_SPEC:
        layers = _int(cfg, "num_hidden_layers", source=source)
        step = _opt_int(cfg, "decoder_sparse_step", 1, source)
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(_is_int(i) and 0 <= i < layers for i in only):
            raise _bad(source, "mlp_only_layers", f"a list of layer indices < {layers}", only)
        fields["dense_layers"] = frozenset(
            i for i in range(layers) if i in only or (i + 1) % step != 0
        )
        fields["moe_intermediate_size"] = _int(cfg, "moe_intermediate_size", source=source)
        fields["norm_topk_prob"] = _opt_bool(cfg, "norm_topk_prob", False, source)
    return fields


_GPT2_ACTS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}


def _gpt2_config(cfg: dict[str, Any], source: str) -> ModelConfig:
    hidden = _int(cfg, "n_embd", "hidden_size", source=source)
    heads = _int(cfg, "n_head", "num_attention_heads", source=source)
    act = cfg.get("activation_function", "gelu_new")
    if not isinstance(act, str) or act not in _GPT2_ACTS:
        raise UnsupportedModelError(f"{source}: activation_function {act!r} is not supported")
    if cfg.get("reorder_and_upcast_attn"):
        raise UnsupportedModelError(f"{source}: reorder_and_upcast_attn is not supported")
    return ModelConfig(
        spec=GPT2_SPEC,
        vocab_size=_int(cfg, "vocab_size", source=source),
        hidden_size=hidden,
        num_layers=_int(cfg, "n_layer", "num_hidden_layers", source=source),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=_opt_int(cfg, "n_inner", 4 * hidden, source),
        max_position_embeddings=_int(cfg, "n_positions", "max_position_embeddings", source=source),
        norm_eps=_opt_float(cfg, "layer_norm_epsilon", 1e-5, source),
        activation=_GPT2_ACTS[act],
        tie_word_embeddings=_opt_bool(cfg, "tie_word_embeddings", True, source),
        attention_bias=True,
        attn_scale=None if cfg.get("scale_attn_weights", True) else 1.0,
        scale_attn_by_inverse_layer_idx=_opt_bool(
            cfg, "scale_attn_by_inverse_layer_idx", False, source
        ),
        bos_token_id=_opt_int(cfg, "bos_token_id", None, source, 0),
        eos_token_ids=_eos(cfg, source),
        extra={"model_type": "gpt2"},
    )


def read_config(model_dir: str | Path) -> ModelConfig:
    """Parse ``model_dir/config.json`` (ModelLoadError naming the file when missing or corrupt)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{path}: config.json is missing (a model directory needs one)")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: config.json is not valid JSON ({exc})") from None
    return config_from_dict(cfg, str(path))
