"""The Triton Viterbi kernels against the NumPy twin (backends/cpu/sequence.py), and the twin
against librosa.sequence.viterbi: the decoded paths must be identical (the same additions in
the same dtype), with ties (zero probabilities), -inf transitions, NaN scores, a strided
log_prob and a strided, poisoned out=."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import poisoned_strided, up, view

from pygpukit.backends.cpu import sequence as cs
from pygpukit.backends.triton_kernels import sequence as ts

TINY = np.finfo(np.float64).tiny


def _hmm(b: int, t: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Probabilities with many exact zeros (equal log(tiny) scores: ties everywhere) and a
    sparse transition matrix."""
    rng = np.random.default_rng(seed)
    prob = rng.random((b, t, s)) ** 4
    prob[:, ::2, : s // 2] = 0.0
    trans = rng.random((s, s)) * (rng.random((s, s)) < 0.3) + 0.05 * np.eye(s)
    trans /= trans.sum(axis=1, keepdims=True)
    p_init = np.full(s, 1.0 / s)
    return prob, trans, p_init


def _logs(prob: np.ndarray, trans: np.ndarray, p_init: np.ndarray, dt: str) -> list[np.ndarray]:
    return [np.log(a + TINY).astype(dt) for a in (prob, trans, p_init)]


@pytest.mark.parametrize("tile", [None, (16, 32)], ids=["default-tile", "small-tile"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("b", "t", "s"), [(1, 1, 1), (2, 7, 5), (3, 11, 70), (1, 6, 129)])
def test_viterbi_matches_twin(
    device: str,
    dtype: str,
    b: int,
    t: int,
    s: int,
    tile: tuple[int, int] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """s = 70 and 129 with the small tile: several source chunks and target blocks, with tails
    (the default tile holds them in one chunk)."""
    if tile is not None:
        monkeypatch.setattr(ts, "_BLOCK_J", tile[0])
        monkeypatch.setattr(ts, "_BLOCK_K", tile[1])
    lp, lt, li = _logs(*_hmm(b, t, s, seed=b * t + s), dtype)
    want = cs.viterbi(lp, lt, li)
    got = ts.viterbi(up(lp, device), up(lt, device), up(li, device))
    np.testing.assert_array_equal(got.to_numpy(), want)


def test_twin_is_librosa() -> None:
    librosa = pytest.importorskip("librosa")
    prob, trans, p_init = _hmm(2, 23, 41, seed=3)
    ref = librosa.sequence.viterbi(np.swapaxes(prob, 1, 2), trans, p_init=p_init)
    np.testing.assert_array_equal(cs.viterbi(*_logs(prob, trans, p_init, "float64")), ref)


def test_strided_inputs_out_and_special_values(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ts, "_BLOCK_K", 16)  # the special values in several chunks
    lp, lt, li = _logs(*_hmm(2, 9, 40, seed=8), "float64")
    lt[3, :] = -np.inf  # a state nothing leaves
    lp[1, 4, 7] = np.inf  # an overwhelming observation
    lp[0, 5, 11:13] = np.nan  # NaN ranks above everything (np.argmax)
    lp[1, 2, :] = -np.inf  # a step every state finds impossible: all-(-inf) ties
    want = cs.viterbi(lp, lt, li)
    out = poisoned_strided((2, 9), "int32", device)
    got = ts.viterbi(view(lp, "transposed", device), view(lt, "strided", device),
                     view(li, "strided", device), out=out)  # fmt: skip
    assert got is out
    np.testing.assert_array_equal(got.to_numpy(), want)
