"""Model shapes the decode benchmarks share, and random bf16 weights: either shared with HF
transformers (hf_and_pygpukit: HF initialises the model on the GPU, pygpukit loads the same
tensors through its ordinary loader) or made on the host without torch (random_model)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

CONFIGS: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5,
        rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=1, eos_token_id=2,
    ),
    "qwen3-8b": dict(
        model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096,
        intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, rms_norm_eps=1e-6,
        rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2,
    ),
    # Llama-3.1-8B's shapes: its gate/up product (2 x 14336 columns, K 4096) is 1792 blocks of
    # the 4-bit GEMVs, where the nvfp4 launch past the first wave applies.
    "llama-3.1-8b": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096,
        intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=128256, rms_norm_eps=1e-5,
        rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=1, eos_token_id=2,
    ),
    # Mixtral-8x7B's layer shapes with 2 layers: what the MoE decode benchmark times.
    "mixtral-8x7b-2l": dict(
        model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=4096,
        intermediate_size=14336, num_hidden_layers=2, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=32000, rms_norm_eps=1e-5,
        rope_theta=1000000.0, max_position_embeddings=32768, tie_word_embeddings=False,
        num_local_experts=8, num_experts_per_tok=2, sliding_window=None,
        bos_token_id=1, eos_token_id=2,
    ),
}  # fmt: skip


class TorchSource:
    """The models' TensorSource protocol over a torch state dict (bf16 on the host)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    @property
    def tensor_names(self) -> list[str]:
        return list(self.state)

    def tensor(self, name: str) -> Any:
        import torch

        t = self.state[name].detach()
        return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)


def hf_and_pygpukit(name: str, seed: int = 0) -> tuple[Any, Any]:
    """(HF model, pygpukit model) of config ``name`` with the same random bf16 weights, both on
    cuda:0."""
    import torch
    import transformers

    import pygpukit as gp
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.models.weights import load_weights

    cfg = dict(CONFIGS[name])
    hf_cfg = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16).eval()
    dev = gp.device("cuda:0")
    config = config_from_dict(cfg, source=name)
    weights = load_weights(TorchSource(hf.state_dict()), config, gp.bfloat16, dev, where=name)
    ours = CausalTransformerModel(config, weights, gp.bfloat16, dev, source=name)
    return hf, ours


class RandomBf16:
    """Random bf16 tensors under the names the loader asks for (shapes from the loader's
    own walk of the config): enough to time a decode, not to read its text.

    Normals are drawn once into a pool of POOL values (a prime count, so rows of any width do
    not line up with it); a tensor is the pool from a random start, tiled to its size, scaled
    by 1/sqrt(fan-in). Drawing every value of an 8B-parameter shape took over 100 s on the
    host; tiling is a copy. The decode's time does not depend on the values."""

    POOL = 16_777_259

    def __init__(self, names_shapes: dict[str, tuple[int, ...]], seed: int = 0) -> None:
        self.shapes = names_shapes
        self.rng = np.random.default_rng(seed)
        self.pool = self.rng.standard_normal(self.POOL, dtype=np.float32)

    @property
    def tensor_names(self) -> list[str]:
        return list(self.shapes)

    def tensor(self, name: str) -> Any:
        s = self.shapes[name]
        pool = self.pool * np.float32(1.0 / np.sqrt(s[-1]) if len(s) > 1 else 0.1)
        if len(s) == 1:
            pool += 1.0
        # Round to bf16 (nearest even) on the pool, by hand: ml_dtypes' astype took 17 ns a
        # value, too slow for the tiled tensor; then tile the 16-bit values (a copy).
        bits = pool.view(np.uint32)
        bits += 0x7FFF + ((bits >> 16) & 1)
        half = np.ascontiguousarray(bits.view(np.uint16)[1::2])  # little-endian high halves
        start = int(self.rng.integers(self.POOL))
        x = np.resize(np.roll(half, -start), int(np.prod(s))).reshape(s)
        return x.view(ml_dtypes.bfloat16)


def hf_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    h, f = cfg["hidden_size"], cfg["intermediate_size"]
    d = cfg.get("head_dim", h // cfg["num_attention_heads"])
    nq, nkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    out = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
    if not cfg.get("tie_word_embeddings"):
        out["lm_head.weight"] = (cfg["vocab_size"], h)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {
            p + "self_attn.q_proj.weight": (nq, h), p + "self_attn.k_proj.weight": (nkv, h),
            p + "self_attn.v_proj.weight": (nkv, h), p + "self_attn.o_proj.weight": (h, nq),
            p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
            p + "mlp.down_proj.weight": (h, f), p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }  # fmt: skip
        if cfg["model_type"] == "qwen3":
            out[p + "self_attn.q_norm.weight"] = (d,)
            out[p + "self_attn.k_norm.weight"] = (d,)
    return out


def weight_bytes(cfg: dict[str, Any]) -> int:
    """bf16 bytes of every weight of config ``cfg``: the decode bound's bytes (the input
    embedding included, of which a step reads only its tokens' rows when it is not the
    lm_head)."""
    return sum(int(np.prod(s)) * 2 for s in hf_shapes(cfg).values())


def random_model(
    name: str, seed: int = 0, quantize: str | None = None
) -> tuple[Any, dict[str, Any], int]:
    """(pygpukit model on cuda:0, config dict, bf16 weight bytes) of config ``name`` with random
    bf16 weights made on the host (no torch needed): enough to time a decode, not to read its
    text. quantize: load_weights' quantize= ("fp8", "int4", "nvfp4", ...), the weights
    quantized at load."""
    import pygpukit as gp
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.models.weights import load_weights

    cfg = dict(CONFIGS[name])
    dev = gp.device("cuda:0")
    config = config_from_dict(cfg, source=name)
    shapes = hf_shapes(cfg)
    weights = load_weights(
        RandomBf16(shapes, seed), config, gp.bfloat16, dev, where="random", quantize=quantize
    )
    model = CausalTransformerModel(config, weights, gp.bfloat16, dev, source=name)
    return model, cfg, weight_bytes(cfg)


def product_class(cfg: dict[str, Any], n: int, k: int) -> str:
    """Which product of a decode step an [n, k] weight of config ``cfg`` is: "qkv" (the engine's
    stacked q, k and v, or a lone k or v), "o_proj", "gate/up" (stacked or one of them), "down",
    "lm_head", else "NxK"."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    kv = cfg.get("num_key_value_heads", heads)
    if n == cfg["vocab_size"]:
        return "lm_head"
    if k == inter:
        return "down"
    if k == h and n in (inter, 2 * inter):
        return "gate/up"
    if k == h and n == (heads + 2 * kv) * d:
        return "qkv"
    if n == h and k == heads * d:
        return "o_proj"  # (a separate q projection of a square model would land here)
    if k == h and n == kv * d:
        return "qkv"
    return f"{n}x{k}"


def random_prompts(cfg: dict[str, Any], rows: int, length: int = 16) -> list[list[int]]:
    """A different random prompt of ``length`` tokens for each of ``rows`` rows."""
    rng = np.random.default_rng(1)
    return [[int(t) for t in rng.integers(3, cfg["vocab_size"], length)] for _ in range(rows)]


def timed_generate(
    model: Any, batch: list[list[int]], new: int, repeats: int, **kw: Any
) -> tuple[float, list[Any]]:
    """(median decode tokens/s, the outputs of each repeat) of ``model.generate(batch, new,
    **kw)``, after a short warm-up call (compile, capture)."""
    import statistics

    from pygpukit.models import GenerationStats

    model.generate(batch, max_new_tokens=8, **kw)
    rates, outs = [], []
    for _ in range(repeats):
        st = GenerationStats()
        outs.append(model.generate(batch, max_new_tokens=new, stats=st, **kw))
        rates.append(st.decode_tokens_per_s)
    return statistics.median(rates), outs
