"""A tiny random-weight Llama written in the test: config.json plus safetensors (one file or two
shards with an index), by a writer of the format's few lines (the safetensors package is not a
test dependency)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 64, 32, 2, 1, 16, 48, 2

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB,
    "hidden_size": HIDDEN,
    "intermediate_size": FFN,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "head_dim": HEAD_DIM,
    "max_position_embeddings": 96,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def tiny_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """HF Llama tensor names and shapes; std 0.5 so that greedy tokens vary with the prefix."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    out = {"model.embed_tokens.weight": w(VOCAB, HIDDEN), "lm_head.weight": w(VOCAB, HIDDEN)}
    out["model.norm.weight"] = 1 + w(HIDDEN) / 4
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = 1 + w(HIDDEN) / 4
        out[p + "post_attention_layernorm.weight"] = 1 + w(HIDDEN) / 4
        out[p + "self_attn.q_proj.weight"] = w(q, HIDDEN)
        out[p + "self_attn.k_proj.weight"] = w(kv, HIDDEN)
        out[p + "self_attn.v_proj.weight"] = w(kv, HIDDEN)
        out[p + "self_attn.o_proj.weight"] = w(HIDDEN, q)
        out[p + "mlp.gate_proj.weight"] = w(FFN, HIDDEN)
        out[p + "mlp.up_proj.weight"] = w(FFN, HIDDEN)
        out[p + "mlp.down_proj.weight"] = w(HIDDEN, FFN)
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors layout: u64 little-endian header size, a JSON header of dtype, shape and
    byte offsets per tensor, then the raw bytes."""
    header: dict[str, object] = {}
    blobs, offset = [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_tiny_llama(root: Path, sharded: bool = False, seed: int = 0) -> Path:
    """A checkpoint directory; sharded: two files and model.safetensors.index.json."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    weights = tiny_weights(seed)
    if not sharded:
        write_safetensors(root / "model.safetensors", weights)
        return root
    names = list(weights)
    halves = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    weight_map = {}
    for fname, part in halves.items():
        write_safetensors(root / fname, {n: weights[n] for n in part})
        weight_map.update(dict.fromkeys(part, fname))
    index = {"metadata": {}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root
