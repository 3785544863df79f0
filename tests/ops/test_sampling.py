"""gp.sample on the NumPy backend: the Philox stream against Random123's known answers, the
distribution against the host sampler's (chi-square over many draws), greedy, the in-place
counter and seen marks, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.backends.cpu.sampling import philox_rounds, uniform24
from pygpukit.models.sampling import Sampler, SamplingParams

# Random123 kat_vectors, philox4x32 with 10 rounds: (counter words, key words) -> output words.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr, key, want", KAT)
def test_philox_known_answers(ctr: tuple, key: tuple, want: tuple) -> None:
    got = philox_rounds(tuple(np.array([w]) for w in ctr), key)  # type: ignore[arg-type]
    assert tuple(int(w[0]) for w in got) == want


def test_uniforms_are_24_bit_and_in_range() -> None:
    u = uniform24(np.arange(100000), 7)
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0
    assert np.all((u * 2**24) == np.floor(u * 2**24))
    assert abs(float(u.mean()) - 0.5) < 0.005


def _draws(logits: np.ndarray, n: int, **kw: object) -> np.ndarray:
    rows = gp.from_numpy(np.ascontiguousarray(np.broadcast_to(logits, (n, logits.shape[0]))))
    counter = gp.from_numpy(np.arange(n, dtype=np.int64))
    return gp.sample(rows, counter, seed=11, **kw).to_numpy()  # type: ignore[arg-type]


def _chi2_ok(draws: np.ndarray, probs: np.ndarray) -> None:
    """Pearson's chi-square over the tokens with expected count >= 5 (the rest pooled) below
    the 0.999 quantile (Wilson-Hilferty), and no draw outside the support."""
    n = draws.size
    counts = np.bincount(draws, minlength=probs.size)
    assert counts[probs == 0].sum() == 0, "drew a token the filters removed"
    exp = probs * n
    big = exp >= 5
    obs = np.append(counts[big], counts[~big].sum())
    ex = np.append(exp[big], exp[~big].sum())
    keep = ex > 0
    stat = float((((obs - ex) ** 2)[keep] / ex[keep]).sum())
    dof = int(keep.sum()) - 1
    z = 3.09  # 0.999
    crit = dof * (1 - 2 / (9 * dof) + z * np.sqrt(2 / (9 * dof))) ** 3
    assert stat < crit, f"chi-square {stat:.1f} over {dof} dof (critical {crit:.1f})"


@pytest.mark.parametrize(
    "kw",
    [
        {"temperature": 1.0},
        {"temperature": 0.7, "top_k": 8},
        {"temperature": 1.3, "top_p": 0.8},
        {"temperature": 0.9, "top_k": 12, "top_p": 0.9},
        {"temperature": 0.9, "top_k": 12, "top_p": 0.9, "min_p": 0.05},
    ],
    ids=str,
)
def test_distribution_matches_the_host_sampler(kw: dict) -> None:
    logits = (np.random.default_rng(3).standard_normal(40) * 1.5).astype(np.float32)
    params = SamplingParams(
        temperature=kw["temperature"],
        top_k=kw.get("top_k", 0),
        top_p=kw.get("top_p", 1.0),
        min_p=kw.get("min_p", 0.0),
    )
    probs = Sampler(params).probs_row(logits, [])
    assert probs is not None
    _chi2_ok(_draws(logits, 20000, **kw), probs)


def test_min_p_keeps_tokens_near_the_top() -> None:
    logits = (np.random.default_rng(5).standard_normal(40) * 2).astype(np.float32)
    p = np.exp(logits.astype(np.float64) - logits.max())
    p = np.where(p >= 0.1, p, 0.0)  # min_p 0.1: probability >= 0.1 x the largest
    _chi2_ok(_draws(logits, 20000, temperature=1.0, min_p=0.1), p / p.sum())


def test_greedy_and_the_penalty_follow_the_host_sampler() -> None:
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((5, 300)).astype(np.float32)
    history = [[int(t) for t in rng.integers(0, 300, 20)] for _ in range(5)]
    seen = np.zeros((5, 300), np.uint8)
    for r, h in enumerate(history):
        seen[r, h] = 1
    host = Sampler(SamplingParams(temperature=0, repetition_penalty=1.7))
    want = host.greedy_ids(gp.from_numpy(logits), history)
    counter, marks = gp.zeros((5,), gp.int64), gp.from_numpy(seen)
    got = gp.sample(gp.from_numpy(logits), counter, marks, temperature=0, repetition_penalty=1.7)
    assert got.dtype is gp.int32 and [int(t) for t in got.to_numpy()] == want
    assert list(counter.to_numpy()) == [1] * 5  # every call advances the stream
    assert all(marks.to_numpy()[r, t] == 1 for r, t in enumerate(want))


def test_a_seed_and_counter_repeat_and_rows_are_independent() -> None:
    logits = np.random.default_rng(9).standard_normal((4, 500)).astype(np.float32)
    a = gp.sample(gp.from_numpy(logits), gp.from_numpy(np.array([5, 6, 7, 8])), seed=3)
    b = gp.sample(gp.from_numpy(logits), gp.from_numpy(np.array([5, 6, 7, 8])), seed=3)
    one = gp.sample(gp.from_numpy(logits[2:3]), gp.from_numpy(np.array([7])), seed=3)
    assert list(a.to_numpy()) == list(b.to_numpy()) and a.to_numpy()[2] == one.to_numpy()[0]


@pytest.mark.parametrize(
    "kw, exc, msg",
    [
        ({"temperature": -1.0}, ValueError, "temperature must be a finite number >= 0"),
        ({"top_p": 0.0}, ValueError, r"top_p must be in \(0, 1\]"),
        ({"min_p": 1.0}, ValueError, r"min_p must be in \[0, 1\)"),
        ({"top_k": -2}, ValueError, "top_k must be an int >= 0"),
        ({"seed": -1}, ValueError, r"seed must be an int in \[0, 2\*\*63\)"),
        ({"repetition_penalty": 0.0}, ValueError, "repetition_penalty must be a finite number > 0"),
    ],
)
def test_bad_parameters_name_themselves(kw: dict, exc: type, msg: str) -> None:
    logits, counter = gp.zeros((2, 10)), gp.zeros((2,), gp.int64)
    with pytest.raises(exc, match=msg):
        gp.sample(logits, counter, **kw)
    assert list(counter.to_numpy()) == [0, 0]  # nothing ran


def test_bad_arrays_name_themselves() -> None:
    logits = gp.zeros((2, 10))
    with pytest.raises(ValueError, match=r"counter must be int64 \[2\]"):
        gp.sample(logits, gp.zeros((2,), gp.int32))
    with pytest.raises(ValueError, match=r"seen must be uint8 \[2, 10\]"):
        gp.sample(logits, gp.zeros((2,), gp.int64), gp.zeros((2, 9), gp.uint8))
    with pytest.raises(ValueError, match=r"logits must be \[batch, vocab\]"):
        gp.sample(gp.zeros((10,)), gp.zeros((1,), gp.int64))
    with pytest.raises(TypeError, match="logits"):
        gp.sample(gp.zeros((2, 10), gp.int32), gp.zeros((2,), gp.int64))
