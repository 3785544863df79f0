"""Parity with HF transformers on tiny random-weight models of each architecture family.

The checkpoints and goldens under tests/fixtures/hf/ come from tests/fixtures/hf/make_goldens.py
(transformers 5.17, torch 2.11): greedy 32 tokens for two prompts and the float32 logits at the
last prompt position. In float32 on the CPU backend the greedy tokens must be identical and the
logits agree to float32 rounding. When torch and transformers are importable, HF also re-runs
live on the same checkpoints.
"""

from __future__ import annotations

import numpy as np
import pytest

from pygpukit import llm
from pygpukit.models import load_model

from ._util import ARCHS, FIXTURES, golden, golden_logits, hf_available

NEW = 32


@pytest.fixture(scope="module", params=ARCHS)
def arch_model(request: pytest.FixtureRequest) -> tuple[str, llm.CausalTransformerModel]:
    return request.param, load_model(FIXTURES / request.param, dtype="float32", device="cpu")


def test_greedy_tokens_match_hf(arch_model: tuple[str, llm.CausalTransformerModel]) -> None:
    arch, model = arch_model
    g = golden(arch)
    for prompt, want in zip(g["prompts"], g["greedy"], strict=True):
        out = model.generate(prompt, max_new_tokens=NEW, temperature=0, stop_token_ids=())
        assert out[: len(prompt)] == prompt
        got = out[len(prompt) :]
        first_bad = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None
        )
        assert got == want, f"{arch}: first divergence at new token {first_bad}"


def test_logits_match_hf(arch_model: tuple[str, llm.CausalTransformerModel]) -> None:
    arch, model = arch_model
    g = golden(arch)
    ref = golden_logits(arch)
    for i, prompt in enumerate(g["prompts"]):
        cache = model.new_cache(1, len(prompt))
        got = model.forward([prompt], cache).to_numpy()[0, -1]
        err = np.abs(got - ref[i]).max() / np.abs(ref[i]).max()
        assert err < 1e-5, f"{arch}: prompt {i} relative max error {err:.2e}"
        assert int(np.argmax(got)) == int(np.argmax(ref[i]))


def test_batch_of_different_lengths(arch_model: tuple[str, llm.CausalTransformerModel]) -> None:
    """Both prompts (8 and 5 tokens) in one batch give each prompt's own greedy tokens."""
    arch, model = arch_model
    g = golden(arch)
    outs = model.generate(g["prompts"], max_new_tokens=NEW, temperature=0, stop_token_ids=())
    got = [o[len(p) :] for o, p in zip(outs, g["prompts"], strict=True)]
    assert got == g["greedy"]


@pytest.mark.parametrize("arch", ["llama", "mixtral"])
def test_decode_strategies_are_greedy_equivalent(arch: str) -> None:
    model = load_model(FIXTURES / arch, dtype="float32", device="cpu")
    g = golden(arch)
    prompt, want = g["prompts"][0], g["greedy"][0]
    graph = llm.DecodeM1Graph().bind(model)
    assert isinstance(graph, llm.DecodeM1Graph)
    graph.init_graph(max_seq_len=64)
    assert not graph.has_graph() and "CUDA graphs are not available" in graph.graph_reason
    for strat in (llm.DecodeM1().bind(model), graph, llm.DecodeJacobi(n_tokens=4).bind(model)):
        assert strat.generate(prompt, NEW, stop_token_ids=()) == want, type(strat).__name__
    jac = llm.DecodeJacobi(n_tokens=6, max_iter=1)
    jac.bind(model)
    assert jac.generate(prompt, NEW, stop_token_ids=()) == want
    batch = llm.DecodeBatch(batch_size=2).bind(model)
    assert isinstance(batch, llm.DecodeBatch)
    assert batch.generate_batch(g["prompts"], NEW, stop_token_ids=()) == g["greedy"]


def test_step_batch_and_step_agree() -> None:
    """0.2.x forms: step_batch over k tokens equals k single steps."""
    model = load_model(FIXTURES / "qwen3", dtype="float32", device="cpu")
    prompt = golden("qwen3")["prompts"][0]
    m1 = llm.DecodeM1().bind(model)
    m1.prefill(prompt)
    singles = [m1.step(t, len(prompt) + i).to_numpy() for i, t in enumerate([3, 4, 5])]
    b = llm.DecodeBatch(batch_size=1).bind(model)
    b.prefill(prompt)
    multi = b.step_batch([3, 4, 5], len(prompt), len(prompt) + 3).to_numpy()
    np.testing.assert_allclose(multi, np.stack(singles), rtol=1e-5, atol=1e-5)


def test_use_cache_false_matches() -> None:
    model = load_model(FIXTURES / "gpt2", dtype="float32", device="cpu")
    g = golden("gpt2")
    out = model.generate(g["prompts"][1], 12, temperature=0, use_cache=False, stop_token_ids=())
    assert out[len(g["prompts"][1]) :] == g["greedy"][1][:12]


@pytest.mark.skipif(not hf_available(), reason="torch/transformers not installed (goldens used)")
@pytest.mark.parametrize("arch", ARCHS)
def test_live_hf(arch: str) -> None:
    import torch
    import transformers

    g = golden(arch)
    cls = getattr(transformers, g["architecture"])
    ref = cls.from_pretrained(FIXTURES / arch, dtype=torch.float32).eval()
    model = load_model(FIXTURES / arch, dtype="float32", device="cpu")
    prompt = g["prompts"][0]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        want = ref(ids).logits[0].numpy()
        gen = ref.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=NEW,
            min_new_tokens=NEW,
            pad_token_id=0,
        )
    got = model.forward([prompt], model.new_cache(1, len(prompt)), all_logits=True).to_numpy()[0]
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-5
    assert (
        gen[0, len(prompt) :].tolist()
        == model.generate(prompt, NEW, temperature=0, stop_token_ids=())[len(prompt) :]
    )
