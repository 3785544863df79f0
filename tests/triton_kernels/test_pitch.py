"""The Triton pYIN observation kernel against the NumPy twin (backends/cpu/pitch.py), and the twin
against librosa's own per-frame function. Rows are random CMND-like curves with many troughs;
bins_per_semitone = 1 and long periods put several candidates into one pitch bin, so the
last-write-wins rule is exercised. The probabilities are float64 sums taken in another order by
the kernel (a tree) than by the twin (a dot product), so they agree to a few ulps (atol 1e-15 on
values <= 1); which bins hold a probability must be identical."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import up, view

from pygpukit.audio._pyin_tables import threshold_prior
from pygpukit.backends.cpu import pitch as cp
from pygpukit.backends.triton_kernels import pitch as tp

ATOL = 1e-15


def _rows(rows: int, p: int, dt: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((rows, p)) * 0.5
    x[:, ::3] *= 0.1  # deep troughs every third period, below the first thresholds
    x[0] = np.linspace(1.0, 0.0, p)  # falling to the end: one trough, the last period
    if rows > 1:
        x[1] = 0.7  # flat: no trough at all
    shifts = rng.uniform(-0.95, 0.95, (rows, p))
    return x.astype(dt), shifts.astype(dt)


def _params(min_period: int, p: int, n_pitch: int, per_semitone: int) -> dict[str, float | int]:
    """fmin at about the longest period's frequency, so most candidates land in the grid."""
    return {
        "min_period": min_period,
        "sr": 16000.0,
        "fmin": 16000.0 / (min_period + 0.8 * p),
        "n_pitch_bins": n_pitch,
        "bins_per_semitone": per_semitone,
        "boltzmann": 2.0,
        "no_trough_prob": 0.01,
    }


def _compare(got: tuple, want: tuple, n_pitch: int) -> None:
    """The voiced bins holding a probability identical; the values within ATOL (the unvoiced
    half is (1 - voiced_prob) / n_pitch: where voiced_prob is 1 up to rounding it is 0 on one
    side and ~1e-18 on the other)."""
    obs, voiced = (g.to_numpy() for g in got)
    w_obs, w_voiced = want
    np.testing.assert_array_equal(obs[:, :n_pitch] != 0, w_obs[:, :n_pitch] != 0)
    np.testing.assert_allclose(obs, w_obs, rtol=0, atol=ATOL)
    np.testing.assert_allclose(voiced, w_voiced, rtol=0, atol=ATOL)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("rows", "p", "n_thr", "n_pitch", "per"),
    [(3, 2, 1, 5, 1), (5, 37, 7, 60, 1), (4, 230, 100, 70, 1), (3, 300, 20, 400, 10)],
)
def test_observations_match_twin(
    device: str, dtype: str, rows: int, p: int, n_thr: int, n_pitch: int, per: int
) -> None:
    """p = 300 pads to 512 lanes; 70 bins of a semitone put the shortest periods' candidates
    past the grid (clipped to bin n_pitch: the unvoiced half, overwritten) and the longest
    below it (clipped to bin 0)."""
    x, sh = _rows(rows, p, dtype, seed=p + n_thr)
    thr, beta = threshold_prior(n_thr, 2.0, 18.0)
    kw = _params(10, p, n_pitch, per)
    want = cp.pyin_observations(x, sh, thr, beta, **kw)
    got = tp.pyin_observations(up(x, device), up(sh, device), up(thr, device), up(beta, device),
                               **kw)  # fmt: skip
    _compare(got, want, n_pitch)
    if p > 30:
        assert (want[0][:, :n_pitch] != 0).sum(axis=1).max() > 1  # several candidates kept


def _shared_bins() -> tuple[np.ndarray, np.ndarray]:
    """A trough at every odd column, heights rising slowly (so each has its own probability)."""
    p = 60
    x = np.full((1, p), 0.8)
    x[0, 1::2] = 0.05 + 0.001 * np.arange(p // 2)
    return x, np.zeros((1, p))


def test_shared_bins_keep_the_longest_period(device: str) -> None:
    """Troughs two periods apart at periods ~ 400 are ~9 cents apart: one semitone bin holds
    several of them, and it must hold the probability of the last (as librosa's assignment)."""
    x, sh = _shared_bins()
    thr, beta = threshold_prior(100, 2.0, 18.0)
    kw = _params(400, 60, 30, 1)
    want = cp.pyin_observations(x, sh, thr, beta, **kw)
    got = tp.pyin_observations(up(x, device), up(sh, device), up(thr, device), up(beta, device),
                               **kw)  # fmt: skip
    _compare(got, want, 30)
    kept = np.count_nonzero(want[0][0, :30])
    assert 0 < kept < 30  # fewer bins than candidates: bins were shared


def test_strided_inputs(device: str) -> None:
    x, sh = _rows(6, 45, "float64", seed=4)
    thr, beta = threshold_prior(30, 1.5, 10.0)
    kw = _params(12, 45, 90, 1)
    want = cp.pyin_observations(x, sh, thr, beta, **kw)
    got = tp.pyin_observations(
        view(x, "transposed", device), view(sh, "strided", device),
        view(thr, "strided", device), view(beta, "strided", device), **kw,
    )  # fmt: skip
    _compare(got, want, 90)


@pytest.mark.parametrize("case", ["many-troughs", "shared-bins"])
def test_twin_is_librosas_frame_step(case: str) -> None:
    """The twin against librosa.core.pitch's own __pyin_helper ([periods, frames] layout)."""
    pitch = pytest.importorskip("librosa.core.pitch")
    scipy_stats = pytest.importorskip("scipy.stats")
    frame_step = getattr(pitch, "__pyin_helper")
    if case == "many-troughs":
        x, sh = _rows(9, 120, "float64", seed=9)
        kw = _params(10, 120, 400, 10)
    else:
        x, sh = _shared_bins()
        kw = _params(400, 60, 30, 1)
    n_pitch = int(kw["n_pitch_bins"])
    thr_all = np.linspace(0, 1, 101)
    beta_ref = np.diff(scipy_stats.beta.cdf(thr_all, 2.0, 18.0))
    obs_ref, voiced_ref = frame_step(
        x.T, sh.T, kw["sr"], thr_all, kw["boltzmann"], beta_ref, kw["no_trough_prob"],
        kw["min_period"], kw["fmin"], n_pitch, kw["bins_per_semitone"],
    )  # fmt: skip
    # the same prior (scipy's), so the same operations in the same order: the same bits
    obs, voiced = cp.pyin_observations(x, sh, thr_all[1:], beta_ref, **kw)
    np.testing.assert_array_equal(obs, obs_ref[0].T)
    np.testing.assert_array_equal(voiced, voiced_ref[0])
    assert (obs[:, :n_pitch] != 0).sum() > 2
