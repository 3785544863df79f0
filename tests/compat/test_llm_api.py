"""Every 0.2.x call form of docs/api-0.2.md's LLM section, from ``from pygpukit import llm``, on a
tiny random-weight Llama made here, CPU device; and the 0.2.x generate forms give the engine's
tokens (pygpukit.models.generation) for the same arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pygpukit import llm
from pygpukit.models import SamplingParams
from pygpukit.models import generation as engine

from ._tiny import VOCAB, tiny_weights, write_tiny_llama

PROMPTS = [[1, 17, 33, 5, 60, 9], [1, 4, 44], [1, 8, 8, 30, 21]]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "llama")


@pytest.fixture(scope="module")
def model(ckpt: Path) -> llm.CausalTransformerModel:
    return llm.load_model_from_safetensors(str(ckpt))


def test_safetensors_file_and_load_safetensors(ckpt: Path, tmp_path: Path) -> None:
    path = ckpt / "model.safetensors"
    f = llm.SafeTensorsFile(path)
    want = tiny_weights()
    assert f.num_tensors == len(want) and sorted(f.tensor_names) == sorted(want)
    assert f.file_size == path.stat().st_size
    sharded = write_tiny_llama(tmp_path / "sharded", sharded=True)
    for src in (path, ckpt, sharded / "model.safetensors.index.json"):
        st = llm.load_safetensors(src)
        assert sorted(st.tensor_names) == sorted(want), src
        name = "model.layers.1.mlp.up_proj.weight"
        np.testing.assert_array_equal(np.asarray(st.tensor(name)), want[name])
    assert isinstance(llm.load_safetensors(sharded), llm.ShardedSafeTensors)


def test_detect_model_spec(ckpt: Path) -> None:
    names = llm.SafeTensorsFile(ckpt / "model.safetensors").tensor_names
    assert llm.detect_model_spec(names) is llm.LLAMA_SPEC
    specs = (llm.GPT2_SPEC, llm.LLAMA_SPEC, llm.QWEN2_SPEC, llm.QWEN3_SPEC, llm.MIXTRAL_SPEC)
    assert len({s.name for s in specs}) == 5


def test_load_model_from_safetensors_forms(ckpt: Path) -> None:
    m16 = llm.load_model_from_safetensors(str(ckpt), dtype="float16", spec=None)
    assert isinstance(m16, llm.CausalTransformerModel) and m16.dtype.name == "float16"
    m = llm.load_model_from_safetensors(ckpt / "model.safetensors", spec=llm.LLAMA_SPEC)
    # The 0.2.x default: float16 on a GPU; the CPU device computes in float32.
    assert m.dtype.name == ("float32" if m.device.type == "cpu" else "float16")
    assert m.config.vocab_size == VOCAB


def test_model_generate_0_2_form(model: llm.CausalTransformerModel) -> None:
    ids = PROMPTS[0]
    out = model.generate(
        ids, max_new_tokens=32, temperature=0.7, top_k=50, top_p=0.9, use_cache=True
    )
    assert out[: len(ids)] == ids and len(out) <= len(ids) + 32
    assert all(0 <= t < VOCAB for t in out)
    positional = model.generate(ids, 8, 0.0, 50, 0.9, True)
    assert positional == model.generate(ids, max_new_tokens=8, temperature=0)
    batch = model.generate(PROMPTS, 8, temperature=0)
    assert [b[: len(p)] for b, p in zip(batch, PROMPTS, strict=True)] == PROMPTS


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_is_the_engine_generate(
    model: llm.CausalTransformerModel, use_cache: bool
) -> None:
    """Greedy and seeded sampling: the method, llm.generate, the engine's generate and stream
    all give the same tokens."""
    for kw in ({"temperature": 0.0}, {"temperature": 0.9, "top_k": 20, "top_p": 0.8, "seed": 11}):
        args = {"top_k": 50, "top_p": 0.9, **kw}
        got = model.generate(PROMPTS[0], 12, use_cache=use_cache, stop_token_ids=(), **args)
        want = engine.generate(
            model, PROMPTS[0], 12, use_cache=use_cache, stop_token_ids=(), **args
        )
        assert (
            got
            == want
            == llm.generate(model, PROMPTS[0], 12, use_cache=use_cache, stop_token_ids=(), **args)
        )
        params = SamplingParams(
            args["temperature"], args["top_k"], args["top_p"], 1.0, args.get("seed")
        )
        streamed = list(
            engine.stream(model, PROMPTS[0], 12, params, stop_ids=(), use_cache=use_cache)
        )
        assert got == PROMPTS[0] + streamed and len(streamed) == 12
    a = model.generate(PROMPTS[0], 12, temperature=0.9, seed=1, stop_token_ids=())
    b = model.generate(PROMPTS[0], 12, temperature=0.9, seed=2, stop_token_ids=())
    assert a != b  # the seed reaches the sampler


def _greedy(model: llm.CausalTransformerModel, ids: list[int], n: int) -> list[int]:
    return engine.generate(model, ids, n, temperature=0, stop_token_ids=())[len(ids) :]


def test_decode_strategies_give_the_engine_tokens(model: llm.CausalTransformerModel) -> None:
    want = _greedy(model, PROMPTS[0], 16)
    m1 = llm.DecodeM1().bind(model)
    assert isinstance(m1, llm.DecodeM1) and m1.generate(PROMPTS[0], 16, stop_token_ids=()) == want
    g = llm.DecodeM1Graph().bind(model)
    assert isinstance(g, llm.DecodeM1Graph)
    g.init_graph(max_seq_len=64)
    if model.device.type == "cpu":
        assert not g.has_graph() and "CUDA graphs are not available" in g.graph_reason
    else:  # the engine's captured step, replayed by generate
        assert g.has_graph(), g.graph_reason
    assert g.cache is model.cache  # the engine's own cache, where its graphs would be kept
    assert g.generate(PROMPTS[0], 16, stop_token_ids=()) == want
    jac = llm.DecodeJacobi(n_tokens=4).bind(model)
    assert jac.generate(PROMPTS[0], 16, stop_token_ids=()) == want and jac.forwards > 0
    batch = llm.DecodeBatch(batch_size=2).bind(model)
    assert isinstance(batch, llm.DecodeBatch)
    assert batch.generate_batch(PROMPTS, 10, stop_token_ids=()) == [
        _greedy(model, p, 10) for p in PROMPTS
    ]
    # Sampling with a seed: the engine's sampler, the engine's tokens.
    params = SamplingParams(0.8, 30, 0.95, 1.0, 4)
    sampled = list(engine.stream(model, PROMPTS[1], 10, params, stop_ids=()))
    kw = {"temperature": 0.8, "top_k": 30, "top_p": 0.95, "seed": 4, "stop_token_ids": ()}
    assert m1.generate(PROMPTS[1], 10, **kw) == sampled
    assert g.generate(PROMPTS[1], 10, **kw) == sampled
    with pytest.raises(ValueError, match="greedy"):
        jac.generate(PROMPTS[1], 10, **kw)


def test_prefill_and_step_forms(model: llm.CausalTransformerModel) -> None:
    """prefill/step (and step_batch) are single forwards over the strategy's cache: stepping
    the greedy tokens reproduces them."""
    ids, want = PROMPTS[2], _greedy(model, PROMPTS[2], 6)
    for strat in (llm.DecodeM1(), llm.DecodeM1Graph(), llm.DecodeBatch(batch_size=1)):
        s = strat.bind(model)
        logits = s.prefill(ids, max_seq_len=32)
        got = [int(np.argmax(logits.to_numpy()))]
        for i in range(5):
            got.append(int(np.argmax(s.step(got[-1], len(ids) + i, len(ids) + i + 1).to_numpy())))
        assert got == want, type(strat).__name__
    b = llm.DecodeBatch(batch_size=1).bind(model)
    b.prefill(ids)
    multi = b.step_batch(want[:3], len(ids), len(ids) + 3).to_numpy()
    assert [int(t) for t in multi.argmax(-1)] == want[1:4]


class _EagerStep:
    """Stands in for the captured step (models.step_graph.StepGraph) on the CPU: the same call,
    run eagerly over the model's cache, counting replays."""

    kept_bytes = 0

    def __init__(self, model: llm.CausalTransformerModel) -> None:
        self.model, self.cache, self.calls = model, model.cache, 0

    def step(self, tokens: int | list[int]) -> object:
        rows = [tokens] if isinstance(tokens, int) else list(tokens)
        self.calls += 1
        assert self.cache is not None
        return self.model.forward([[t] for t in rows], self.cache)


def test_graph_strategy_replays_the_engine_graph(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DecodeM1Graph uses the step the model keeps for its own cache, the one the engine's
    generate replays; a larger cache (a longer generate or prefill) drops it."""
    model = llm.load_model_from_safetensors(ckpt)
    kept: dict[tuple[int, int], _EagerStep] = {}

    def step_graph(rows: int) -> _EagerStep:
        return kept.setdefault((id(model.cache), rows), _EagerStep(model))

    monkeypatch.setattr(model, "step_graph", step_graph)
    ids = PROMPTS[0]
    g = llm.DecodeM1Graph().bind(model)
    assert not g.has_graph() and "init_graph" in g.graph_reason
    g.init_graph(max_seq_len=40)
    assert g.has_graph() and g.graph_ready and g.graph_reason.startswith("captured")
    (fake,) = kept.values()
    want = _greedy(llm.load_model_from_safetensors(ckpt), ids, 70)  # another model's own cache
    assert g.generate(ids, 16, stop_token_ids=()) == want[:16]
    assert fake.calls == 15 and g.has_graph()  # the engine replayed init_graph's step
    logits = g.prefill(ids, max_seq_len=40)
    assert int(np.argmax(logits.to_numpy())) == want[0]
    assert int(np.argmax(g.step(want[0], len(ids)).to_numpy())) == want[1]
    assert fake.calls == 16
    assert g.generate(ids, 60, stop_token_ids=()) == want[:60]  # needs 66 > 40 tokens
    assert not g.has_graph() and "init_graph again" in g.graph_reason
    g.init_graph(max_seq_len=80)
    assert g.has_graph()
    g.prefill(ids, max_seq_len=90)
    assert not g.has_graph() and "init_graph again" in g.graph_reason
    assert int(np.argmax(g.step(want[0], len(ids)).to_numpy())) == want[1]  # eager again
