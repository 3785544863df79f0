"""benchmarks/_models.product_class (decode_ab.py's quant-sites experiment names each quantized
product of the step by it): every weight of the benchmark configs lands in its class."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks._models import CONFIGS, hf_shapes  # noqa: E402
from benchmarks._models import product_class as _product_class  # noqa: E402

CLASS_OF = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "o_proj": "o_proj",
            "gate_proj": "gate/up", "up_proj": "gate/up", "down_proj": "down",
            "lm_head": "lm_head"}  # fmt: skip


@pytest.mark.parametrize("name", ["llama-3.2-1b", "qwen3-8b", "llama-3.1-8b"])
def test_every_product_of_the_step_has_its_class(name: str) -> None:
    cfg = CONFIGS[name]
    h = cfg["hidden_size"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    inter, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    # As the engine holds them: q, k and v stacked, gate and up stacked.
    assert _product_class(cfg, q + 2 * kv, h) == "qkv"
    assert _product_class(cfg, 2 * inter, h) == "gate/up"
    assert _product_class(cfg, vocab, h) == "lm_head"
    for tensor, shape in hf_shapes(cfg).items():
        part = tensor.split(".")[-2]
        if len(shape) != 2 or part not in CLASS_OF or part == "q_proj":
            continue  # a square model's lone q projection reads as o_proj; the engine stacks it
        assert _product_class(cfg, *shape) == CLASS_OF[part], tensor
    assert _product_class(cfg, 7, 5) == "7x5"  # anything else says its shape
