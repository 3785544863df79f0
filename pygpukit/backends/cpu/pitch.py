"""pYIN's observation probabilities in NumPy: the reference of pygpukit/ops/pitch.py's contract.

librosa.pyin's per-frame step (librosa/core/pitch.py ``__pyin_helper``) frame by frame, with
scipy.stats.boltzmann.pmf written out (scipy's formula, (1 - e^-l) / (1 - e^-(l N)) * e^-(l k)),
so the probabilities, the candidates and the bins are librosa's; the rows are batched and the
candidate assignment keeps NumPy's last-write-wins rule.
"""

from __future__ import annotations

import numpy as np

from ._common import Array

__all__ = ["pyin_observations"]


def _troughs(x: Array) -> Array:
    """librosa.util.localmin along the last axis, with pyin's rule for the first period."""
    t = np.zeros(x.shape, dtype=bool)
    t[:, 1:-1] = (x[:, 1:-1] < x[:, :-2]) & (x[:, 1:-1] <= x[:, 2:])
    t[:, -1] = x[:, -1] < x[:, -2]
    t[:, 0] = x[:, 0] < x[:, 1]
    return t


def _frame_probs(
    heights: Array, thresholds: Array, beta_probs: Array, lam: float, no_trough: float
) -> Array:
    """The probabilities of one frame's troughs (librosa's steps 3 to 5)."""
    below = np.less.outer(heights, thresholds)
    positions = np.cumsum(below, axis=0) - 1
    n_troughs = np.count_nonzero(below, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fact = (1 - np.exp(-lam)) / (1 - np.exp(-lam * n_troughs))
        prior = fact * np.exp(-lam * positions)
    prior[~below] = 0
    probs: Array = prior.dot(beta_probs)
    global_min = np.argmin(heights)
    n_below_min = np.count_nonzero(~below[global_min, :])
    probs[global_min] += no_trough * np.sum(beta_probs[:n_below_min])
    return probs


def pyin_observations(
    yin: Array,
    shifts: Array,
    thresholds: Array,
    beta_probs: Array,
    *,
    min_period: int,
    sr: float,
    fmin: float,
    n_pitch_bins: int,
    bins_per_semitone: int,
    boltzmann: float,
    no_trough_prob: float,
) -> tuple[Array, Array]:
    """(obs float64 [rows, 2 * n_pitch_bins], voiced_prob float64 [rows])."""
    x = np.asarray(yin)
    sh = np.asarray(shifts)
    thr = np.asarray(thresholds, dtype=np.float64)
    beta = np.asarray(beta_probs, dtype=np.float64)
    rows = x.shape[0]
    troughs = _troughs(x)
    yin_probs = np.zeros(x.shape, dtype=np.float64)
    for r in range(rows):
        (idx,) = np.nonzero(troughs[r])
        if idx.size:
            yin_probs[r, idx] = _frame_probs(x[r, idx], thr, beta, boltzmann, no_trough_prob)
    frame, period = np.nonzero(yin_probs)  # row-major: periods ascend within a frame
    candidates = min_period + period + sh[frame, period]
    f0 = sr / candidates
    bins = 12 * bins_per_semitone * np.log2(f0 / fmin)
    bins = np.clip(np.round(bins), 0, n_pitch_bins).astype(int)
    obs = np.zeros((rows, 2 * n_pitch_bins), dtype=np.float64)
    obs[frame, bins] = yin_probs[frame, period]  # later (longer) periods overwrite earlier ones
    # librosa sums a C-contiguous [bins, frames] block over axis 0: one bin after another
    voiced = np.clip(np.sum(np.ascontiguousarray(obs[:, :n_pitch_bins].T), axis=0), 0, 1)
    obs[:, n_pitch_bins:] = ((1 - voiced) / n_pitch_bins)[:, None]
    return obs, voiced
