"""The Triton sampler against the NumPy twin (the same Philox stream and algorithm): tokens,
advanced counters and seen marks; on the GPU also the distribution over many draws."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import GPU, up

from pygpukit.backends.cpu import sampling as cs
from pygpukit.backends.triton_kernels import sampling as ts
from pygpukit.models.sampling import Sampler, SamplingParams

CASES = [
    {"temperature": 0.0},
    {"temperature": 0.0, "repetition_penalty": 1.5},
    {"temperature": 0.8},
    {"temperature": 0.7, "top_k": 50},
    {"temperature": 1.0, "top_p": 0.9},
    {"temperature": 0.9, "top_k": 40, "top_p": 0.8, "min_p": 0.05, "repetition_penalty": 1.3},
    {"temperature": 0.9, "top_k": 300, "top_p": 0.95},  # past FAST_TOP_K: the bisection plan
]


@pytest.mark.parametrize("kw", CASES, ids=str)
def test_matches_the_numpy_twin(device: str, kw: dict) -> None:
    rng = np.random.default_rng(0)
    b, v = 6, 3000  # two blocks and a tail
    logits = (rng.standard_normal((b, v)) * 3).astype(np.float32)
    seen = (rng.random((b, v)) < 0.01).astype(np.uint8)
    c_ref, s_ref = np.arange(b, dtype=np.int64) * 7, seen.copy()
    want = cs.sample(logits, c_ref, s_ref, seed=123, **kw)
    counter, marks = up(np.arange(b, dtype=np.int64) * 7, device), up(seen, device)
    got = ts.sample(up(logits, device), counter, marks, seed=123, **kw)
    assert list(got.to_numpy()) == list(want)
    assert (counter.to_numpy() == c_ref).all() and (marks.to_numpy() == s_ref).all()


@GPU
def test_distribution_on_the_gpu(device: str) -> None:
    """20000 draws of one bf16 row (counters 0..19999, one row each) against the host
    sampler's distribution; and a 151936-token vocabulary draws a token in its support."""
    import ml_dtypes

    logits = (np.random.default_rng(3).standard_normal(1000) * 2).astype(ml_dtypes.bfloat16)
    n = 20000
    rows = up(np.ascontiguousarray(np.broadcast_to(logits, (n, 1000))), device)
    got = ts.sample(rows, up(np.arange(n, dtype=np.int64), device), seed=5, temperature=0.9,
                    top_k=100, top_p=0.9).to_numpy()  # fmt: skip
    probs = Sampler(SamplingParams(temperature=0.9, top_k=100, top_p=0.9)).probs_row(
        logits.astype(np.float32), []
    )
    assert probs is not None
    counts = np.bincount(got, minlength=1000)
    assert counts[probs == 0].sum() == 0
    exp = probs * n
    big = exp >= 5
    stat = float((((counts - exp) ** 2)[big] / exp[big]).sum())
    dof = int(big.sum()) - 1
    crit = dof * (1 - 2 / (9 * dof) + 3.09 * np.sqrt(2 / (9 * dof))) ** 3
    assert stat < crit, f"chi-square {stat:.1f} over {dof} dof (critical {crit:.1f})"
    big_vocab = up(np.random.default_rng(4).standard_normal((2, 151936)).astype(np.float32), device)
    tok = ts.sample(big_vocab, up(np.zeros(2, np.int64), device), temperature=1.0, top_p=0.95)
    assert ((tok.to_numpy() >= 0) & (tok.to_numpy() < 151936)).all()


def _both(device: str, logits: np.ndarray, **kw: object) -> tuple[list[int], list[int]]:
    b = logits.shape[0]
    c_ref, seen_ref = np.arange(b, dtype=np.int64), np.zeros(logits.shape, np.uint8)
    want = cs.sample(logits, c_ref, seen_ref, seed=9, **kw)  # type: ignore[arg-type]
    counter, seen = (
        up(np.arange(b, dtype=np.int64), device),
        up(np.zeros(logits.shape, np.uint8), device),
    )
    got = ts.sample(up(logits, device), counter, seen, seed=9, **kw)  # type: ignore[arg-type]
    assert (counter.to_numpy() == c_ref).all() and (seen.to_numpy() == seen_ref).all()
    return [int(t) for t in got.to_numpy()], [int(t) for t in want]


def test_several_chunks_match_the_twin(device: str) -> None:
    logits = (np.random.default_rng(1).standard_normal((3, 9000)) * 2).astype(np.float32)
    got, want = _both(device, logits, temperature=0.9, top_k=30, top_p=0.9)
    assert got == want


def test_ties_past_the_chunk_candidates_take_the_bisection_plan(device: str) -> None:
    """An all-equal row of 8192 tokens with top_k 5: every token ties the 5th value, more than
    a chunk keeps, so the draw sees the whole row (tokens from both chunks, past the first 32).
    Ten rows: each row is a program the interpreter runs on the CPU (40 took 92 s of CI)."""
    logits = np.zeros((10, 8192), np.float32)
    got, want = _both(device, logits, temperature=1.0, top_k=5)
    assert got == want
    assert max(got) >= 4096 + 64 and min(got) < 4096 and len(set(got)) == 10


@pytest.mark.parametrize(
    "kw",
    [
        {"temperature": 0.0, "repetition_penalty": 1.2},
        {"temperature": 1.0, "top_k": 5},
        {"temperature": 1.0, "top_p": 0.9},
    ],
    ids=str,
)
def test_rows_without_a_finite_logit_draw_token_0(device: str, kw: dict) -> None:
    rows = np.full((3, 4099), np.nan, np.float32)
    rows[1] = -np.inf
    rows[2, :] = np.nan
    rows[2, 7] = 1.0  # NaN counts as -inf: token 7 is the only finite one
    got, want = _both(device, rows, **kw)
    assert got == want == [0, 0, 7]
