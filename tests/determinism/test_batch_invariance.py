"""The deterministic mode's contract on the engine, on the CPU backend (NumPy): a row's logits
have the same bits at every batch size, beside any other rows, and with its prompt prefilled
whole or in chunks; greedy tokens follow. The same checks run on the GPU in
tests/determinism/test_gpu_determinism.py."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models import load_model

FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "hf"
ARCHS = ("llama", "qwen3", "mixtral", "qwen3_moe", "gpt2")


@pytest.fixture(autouse=True)
def _mode() -> Iterator[None]:
    with gp.deterministic():
        yield


@pytest.fixture(scope="module", params=ARCHS)
def model(request: pytest.FixtureRequest) -> gp.llm.CausalTransformerModel:
    return load_model(FIXTURES / request.param, dtype="float32", device="cpu")


def _prompt(rng: np.random.Generator, n: int, vocab: int) -> list[int]:
    return [int(t) for t in rng.integers(1, vocab, n)]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32)


def _last_logits(model, prompts: list[list[int]], chunk: int | None = None) -> np.ndarray:
    """Logits after the last prompt token of each row, prefilled in one forward or in chunks."""
    n = len(prompts[0])
    cache = model.new_cache(len(prompts), n + 4)
    step = chunk or n
    for s in range(0, n, step):
        out = model.forward([p[s : s + step] for p in prompts], cache)
    return out.to_numpy()[:, -1]


def test_row_logits_do_not_depend_on_the_batch(model) -> None:
    rng = np.random.default_rng(7)
    vocab = model.config.vocab_size
    prompts = [_prompt(rng, 11, vocab) for _ in range(16)]
    alone = _last_logits(model, prompts[:1])[0]
    for b in (4, 16):
        together = _last_logits(model, prompts[:b])
        np.testing.assert_array_equal(_bits(together[0]), _bits(alone))
    # and beside other rows than before
    other = _last_logits(model, [prompts[0], *(_prompt(rng, 11, vocab) for _ in range(3))])
    np.testing.assert_array_equal(_bits(other[0]), _bits(alone))


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_row_logits_do_not_depend_on_prefill_chunks(model, chunk: int) -> None:
    rng = np.random.default_rng(11)
    prompts = [_prompt(rng, 20, model.config.vocab_size)]
    whole = _last_logits(model, prompts)
    np.testing.assert_array_equal(_bits(_last_logits(model, prompts, chunk)), _bits(whole))


def test_greedy_tokens_do_not_depend_on_the_batch(model) -> None:
    rng = np.random.default_rng(3)
    prompts = [_prompt(rng, 9, model.config.vocab_size) for _ in range(4)]
    kw = {"max_new_tokens": 12, "temperature": 0, "stop_token_ids": ()}
    alone = model.generate([prompts[0]], **kw)[0]
    assert model.generate(prompts, **kw)[0] == alone


def test_matrix_by_vector_under_the_mode() -> None:
    rng = np.random.default_rng(4)
    a, v = (
        rng.standard_normal((2, 3, 4)).astype(np.float32),
        rng.standard_normal(4).astype(np.float32),
    )
    got = gp.matmul(gp.from_numpy(a), gp.from_numpy(v)).to_numpy()
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, a @ v, rtol=1e-6)
    got = gp.matmul(gp.from_numpy(a[0]), gp.from_numpy(v)).to_numpy()
    np.testing.assert_allclose(got, a[0] @ v, rtol=1e-6)


def test_long_prefill_runs_in_chunks_with_the_same_bits(
    model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefill longer than DETERMINISTIC_CHUNK runs as several forward calls; all_logits joins
    them, and the bits equal a prefill in chunks of 3."""
    from pygpukit.models import transformer

    monkeypatch.setattr(transformer, "DETERMINISTIC_CHUNK", 8)
    rng = np.random.default_rng(12)
    prompt = [_prompt(rng, 21, model.config.vocab_size)]
    cache = model.new_cache(1, 24)
    every = model.forward(prompt, cache, all_logits=True).to_numpy()
    assert every.shape[:2] == (1, 21)
    np.testing.assert_array_equal(_bits(every[:, -1]), _bits(_last_logits(model, prompt, 3)))
    np.testing.assert_array_equal(_bits(every[:, 9]), _bits(_last_logits(model, [prompt[0][:10]])))
