"""Small valid safetensors and GGUF files, written by the tests (the readers' fuzz seeds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def safetensors_bytes(header: dict[str, Any] | None = None, data: bytes | None = None) -> bytes:
    """Two float32 tensors: a [2, 3] and b [4]."""
    if header is None:
        header = {
            "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "F32", "shape": [4], "data_offsets": [24, 40]},
            "__metadata__": {"format": "pt"},
        }
    if data is None:
        data = np.arange(10, dtype=np.float32).tobytes()
    raw = json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + data


def write_gguf(path: Path, tokens: bool = True, **meta: Any) -> None:
    """A llama-architecture GGUF with two F32 tensors, its config metadata and a tiny vocab."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_head_count(2)
    w.add_feed_forward_length(16)
    w.add_context_length(32)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    if tokens:
        w.add_token_list(["a", "b", "ab", "<eos>"])
        w.add_token_merges(["a b"])
    w.add_eos_token_id(3)
    for k, v in meta.items():
        w.add_uint32(k, v) if isinstance(v, int) else w.add_string(k, v)
    w.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
