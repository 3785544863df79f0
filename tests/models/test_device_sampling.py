"""The sampler's device path (gp.sample) as the generation loop uses it, on the CPU device
through gp.sample's NumPy twin (SamplingParams(on_device=True)): its distribution against the
host sampler's, rows keyed by their index and position, seeds, min-p, and bad settings."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models import load_model
from pygpukit.models.generation import stream_batch
from pygpukit.models.sampling import Sampler, SamplingParams

from ._util import FIXTURES


def _logits(n: int, v: int, seed: int = 0) -> gp.GPUArray:
    rng = np.random.default_rng(seed)
    return gp.from_numpy((rng.standard_normal((n, v)) * 1.5).astype(np.float32))


def test_device_draws_follow_the_host_distribution() -> None:
    params = SamplingParams(
        temperature=0.8, top_k=12, top_p=0.9, min_p=0.05, seed=1, on_device=True
    )
    sampler = Sampler(params)
    row = _logits(1, 30)
    # one row, drawn at 20000 positions (each its own counter)
    n = 20000
    draws = [sampler(row, [[0] * pos])[0] for pos in range(n)]
    probs = Sampler(SamplingParams(**{**params.__dict__, "on_device": False})).probs_row(
        row.to_numpy()[0], []
    )
    assert probs is not None
    counts = np.bincount(draws, minlength=30)
    assert counts[probs == 0].sum() == 0
    exp = probs * n
    big = exp >= 5
    stat = float((((counts - exp) ** 2)[big] / exp[big]).sum())
    dof = int(big.sum()) - 1
    assert stat < dof * (1 - 2 / (9 * dof) + 3.09 * np.sqrt(2 / (9 * dof))) ** 3


def test_rows_are_keyed_by_index_and_position() -> None:
    sampler = Sampler(SamplingParams(temperature=1.0, seed=3, on_device=True))
    lg = _logits(4, 500, seed=2)
    hist = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]
    batch = sampler(lg, hist)
    alone = [sampler(lg[b : b + 1], [hist[b]], rows=[b])[0] for b in range(4)]
    assert batch == alone
    again = Sampler(SamplingParams(temperature=1.0, seed=3, on_device=True))(lg, hist)
    assert again == batch
    other = Sampler(SamplingParams(temperature=1.0, seed=4, on_device=True))
    assert any(other(lg, [h + [0] * k for h in hist])[0] != batch[0] for k in range(8))


def test_greedy_with_a_penalty_on_the_device_equals_the_host() -> None:
    lg = _logits(3, 200, seed=5)
    hist = [[int(t) for t in np.random.default_rng(r).integers(0, 200, 15)] for r in range(3)]
    dev = Sampler(SamplingParams(temperature=0, repetition_penalty=1.8, on_device=True))
    host = Sampler(SamplingParams(temperature=0, repetition_penalty=1.8, on_device=False))
    assert dev(lg, hist) == host(lg, hist)


def _run(model: object, prompts: list[list[int]], params: SamplingParams) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {r: [] for r in range(len(prompts))}
    for step in stream_batch(model, prompts, 12, params, stop_ids=()):  # type: ignore[arg-type]
        for r, t in step:
            out[r].append(t)
    return out


def test_generation_samples_on_the_device_path_and_repeats() -> None:
    """The loop keys the prefill's draws by row too: row 0 alone equals row 0 of a batch."""
    model = load_model(FIXTURES / "llama", dtype="float32", device="cpu")
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=11, on_device=True)
    prompts = [[1, 5, 9, 13], [2, 4, 6, 8, 10], [3, 3, 3]]
    first = _run(model, prompts, params)
    assert first == _run(model, prompts, params) and len(first[0]) == 12
    with gp.deterministic():  # row invariance of the logits themselves
        alone = _run(model, prompts[:1], params)[0]
        assert _run(model, prompts, params)[0] == alone


@pytest.mark.parametrize(
    "kw, msg",
    [({"min_p": 1.0}, r"min_p must be in \[0, 1\)"), ({"on_device": "yes"}, "on_device must be")],
)
def test_bad_settings(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        SamplingParams(**kw)


def test_generate_takes_min_p() -> None:
    """model.generate(min_p=...) reaches the sampler: with a seed, min_p near 1 keeps only the
    top token, so the draw equals greedy decoding; a bad min_p is refused by name."""
    model = load_model(FIXTURES / "llama", dtype="float32", device="cpu")
    prompt = [5, 17, 42, 99]
    greedy = model.generate(prompt, 8, temperature=0, stop_token_ids=())
    kept = model.generate(prompt, 8, temperature=1.0, top_k=0, top_p=1.0, min_p=0.999999,
                          seed=3, stop_token_ids=())  # fmt: skip
    assert kept == greedy
    with pytest.raises(ValueError, match="min_p must be"):
        model.generate(prompt, 2, min_p=1.5)
