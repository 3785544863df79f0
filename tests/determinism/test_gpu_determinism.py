"""The deterministic mode on the GPU, bf16, on random-weight models: a Llama shape with SmolLM2's
attention geometry (9 query heads on 3 kv heads, head_dim 64), the same with its linear weights
quantized to int4 at load, and a small Qwen3-MoE shape (16 experts, top-4: the grouped expert GEMM
and the device router), with contexts past one 256-key attention split:

- a row's logits have the same bits at batch 1, 4, 16 and 64 and beside other rows;
- with its prompt prefilled whole or in chunks of 7 and 64 tokens;
- greedy tokens do not depend on the batch, graph replay equals eager, and a speculative
  (n-gram) decode equals plain greedy decoding token for token;
- the default mode still repeats itself run to run, and its graph replay equals eager.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models.config import config_from_dict
from pygpukit.models.transformer import CausalTransformerModel
from pygpukit.models.weights import load_weights

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gp.is_cuda_available(), reason="needs a CUDA device"),
]

CONFIG = dict(
    model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=576,
    intermediate_size=1536, num_hidden_layers=4, num_attention_heads=9, num_key_value_heads=3,
    head_dim=64, vocab_size=4096, rms_norm_eps=1e-5, rope_theta=100000.0,
    max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
MOE_CONFIG = dict(
    model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], hidden_size=512,
    intermediate_size=1024, moe_intermediate_size=256, num_experts=16, num_experts_per_tok=4,
    norm_topk_prob=True, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
    head_dim=64, vocab_size=4096, rms_norm_eps=1e-6, rope_theta=1000000.0,
    max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
CONFIGS = {"llama": CONFIG, "qwen3_moe": MOE_CONFIG, "llama-int4": CONFIG}
# Linear weights quantized at load (int4: the mixed-input GEMM's Triton twin of the decode GEMV
# serves every row count under the mode).
QUANTIZE = {"llama-int4": "int4"}


class _Random:
    """HF-named random bf16 tensors (the loader's TensorSource protocol)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        rng = np.random.default_rng(0)
        h, f, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
        nq, nkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
        shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
        moe = cfg["model_type"] == "qwen3_moe"
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            shapes |= {
                p + "self_attn.q_proj.weight": (nq, h), p + "self_attn.k_proj.weight": (nkv, h),
                p + "self_attn.v_proj.weight": (nkv, h), p + "self_attn.o_proj.weight": (h, nq),
                p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            }  # fmt: skip
            if moe:
                e, fe = cfg["num_experts"], cfg["moe_intermediate_size"]
                shapes[p + "self_attn.q_norm.weight"] = shapes[p + "self_attn.k_norm.weight"] = (d,)
                shapes[p + "mlp.gate.weight"] = (e, h)
                shapes[p + "mlp.experts.gate_up_proj"] = (e, 2 * fe, h)
                shapes[p + "mlp.experts.down_proj"] = (e, h, fe)
            else:
                shapes[p + "mlp.gate_proj.weight"] = shapes[p + "mlp.up_proj.weight"] = (f, h)
                shapes[p + "mlp.down_proj.weight"] = (h, f)
        self.state = {
            k: (1.0 + 0.1 * rng.standard_normal(s) if len(s) == 1 else
                rng.standard_normal(s) / np.sqrt(s[-1])).astype(ml_dtypes.bfloat16)
            for k, s in shapes.items()
        }  # fmt: skip

    @property
    def tensor_names(self) -> list[str]:
        return list(self.state)

    def tensor(self, name: str) -> np.ndarray:
        return self.state[name]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def model(request: pytest.FixtureRequest) -> CausalTransformerModel:
    dev = gp.device("cuda:0")
    cfg = CONFIGS[request.param]
    config = config_from_dict(dict(cfg), source="random")
    q = QUANTIZE.get(request.param)
    weights = load_weights(_Random(cfg), config, gp.bfloat16, dev, where="random", quantize=q)
    return CausalTransformerModel(config, weights, gp.bfloat16, dev, source="random")


@pytest.fixture
def det() -> Iterator[None]:
    with gp.deterministic():
        yield


def _prompts(n_rows: int, n: int, seed: int = 5) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(3, CONFIG["vocab_size"], n)] for _ in range(n_rows)]


def _last(model: CausalTransformerModel, prompts: list[list[int]], chunk: int = 0) -> np.ndarray:
    n = len(prompts[0])
    cache = model.new_cache(len(prompts), n + 8)
    step = chunk or n
    for s in range(0, n, step):
        out = model.forward([p[s : s + step] for p in prompts], cache)
    return out.to_numpy()[:, -1].view(np.uint16)


def test_rows_do_not_depend_on_the_batch(model: CausalTransformerModel, det: None) -> None:
    prompts = _prompts(64, 40)
    alone = _last(model, prompts[:1])[0]
    for b in (4, 16, 64):
        got = _last(model, prompts[:b])
        assert (got[0] == alone).all(), f"row 0 differs at batch {b}"
    other = _last(model, [prompts[0], *_prompts(3, 40, seed=9)])
    assert (other[0] == alone).all()


@pytest.mark.parametrize("chunk", [7, 64])
def test_rows_do_not_depend_on_prefill_chunks(
    model: CausalTransformerModel, det: None, chunk: int
) -> None:
    prompts = _prompts(2, 300)
    assert (_last(model, prompts, chunk) == _last(model, prompts)).all()


def test_greedy_batch_graph_and_speculative(model: CausalTransformerModel, det: None) -> None:
    prompts = _prompts(16, 24)
    # a prompt that repeats itself, so the n-gram drafter proposes and some drafts are kept
    rep = prompts[0] + prompts[0][:12]
    kw: dict[str, Any] = {"max_new_tokens": 48, "temperature": 0, "stop_token_ids": ()}
    alone = model.generate([rep], **kw)[0]
    assert model.generate([rep, *prompts[1:16]], **kw)[0] == alone
    assert model.generate([rep], graph=False, **kw)[0] == alone
    stats = gp.models.GenerationStats()
    assert model.generate(rep, speculative="ngram", stats=stats, **kw) == alone
    assert stats.draft_tokens > 0


def test_default_mode_repeats_and_replays(model: CausalTransformerModel) -> None:
    assert not gp.is_deterministic()
    prompts = _prompts(4, 30)
    kw: dict[str, Any] = {"max_new_tokens": 32, "temperature": 0, "stop_token_ids": ()}
    first = model.generate(prompts, **kw)
    assert model.generate(prompts, **kw) == first
    assert model.generate(prompts, graph=False, **kw) == first
    a, b = _last(model, prompts), _last(model, prompts)
    assert (a == b).all()


def test_sampled_decode_draws_on_the_device(model: CausalTransformerModel) -> None:
    """Sampling draws on the device (gp.sample): a seed repeats the run, graph replay equals
    eager, and under the deterministic mode a row's sampled tokens do not depend on the batch."""
    prompts = _prompts(8, 20, seed=13)
    kw: dict[str, Any] = {
        "max_new_tokens": 40, "temperature": 0.8, "top_k": 50, "top_p": 0.9, "seed": 7,
        "stop_token_ids": (),
    }  # fmt: skip
    first = model.generate(prompts, **kw)
    assert model.generate(prompts, **kw) == first
    assert model.generate(prompts, graph=False, **kw) == first
    with gp.deterministic():
        alone = model.generate(prompts[:1], **kw)[0]
        assert model.generate(prompts, **kw)[0] == alone
