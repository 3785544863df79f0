"""pYIN's observation model: ``pyin_observations``, from the YIN cumulative mean normalized
difference of each frame to the HMM's observation probabilities (librosa.pyin's per-frame
step, the function ``__pyin_helper`` of librosa/core/pitch.py).

For each row r (a frame) of yin [rows, periods] (column i is the period min_period + i) with its
parabolic-interpolation shifts [rows, periods]:

1. troughs: yin[i] < yin[i - 1] and yin[i] <= yin[i + 1] inside; yin[0] < yin[1] at the start,
   yin[-1] < yin[-2] at the end (librosa.util.localmin plus pyin's first-period rule);
2. for each threshold t_j (``thresholds``, librosa's np.linspace(0, 1, n + 1)[1:]) the troughs
   below it, their ranks k among those (period order) and their count N_j; a trough's
   probability is sum_j beta_j * boltzmann.pmf(k, boltzmann, N_j) over the thresholds it is
   below (``beta_probs``: the threshold prior);
3. the deepest trough (first on ties) gains no_trough_prob * (beta mass of the thresholds it is
   not below);
4. each trough with a nonzero probability is a candidate f0 = sr / (min_period + i + shift[i]),
   binned to round(12 * bins_per_semitone * log2(f0 / fmin)) (half to even) clipped to
   [0, n_pitch_bins]; a bin takes the probability of its longest-period candidate (NumPy's
   last-write-wins assignment in librosa). Candidate periods rise strictly with i (troughs are
   at least two columns apart and parabolic interpolation keeps |shift| < 1), so the bins never
   rise along the candidates and the winner of a bin is the candidate whose next candidate has
   another bin; the Triton kernel relies on this, so shifts outside (-1, 1) may keep another
   candidate's probability there than the NumPy reference;
5. voiced_prob = clip(sum of the voiced bins, 0, 1); the unvoiced half of the row is
   (1 - voiced_prob) / n_pitch_bins.

Results: obs float64 [rows, 2 * n_pitch_bins] (voiced bins, then unvoiced) and voiced_prob
float64 [rows]; the probabilities are computed in float64 as librosa does (scipy's boltzmann and
beta are float64). yin and shifts are float32 or float64 (the same), thresholds and beta_probs
float64 [n_thresholds].

Routing (pygpukit/routing/table.py): Triton (backends/triton_kernels/pitch.py, one program per
frame) on CUDA, NumPy on the CPU (backends/cpu/pitch.py: librosa's per-frame step, frame by
frame); no native twin.
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["pyin_observations", "MAX_PERIODS"]

# A frame's periods are held in registers by one program (padded to a power of two).
MAX_PERIODS = 8192


def _int(op: str, name: str, v: Any, low: int) -> int:
    try:
        i = operator.index(v) if not isinstance(v, bool) else None
    except TypeError:
        i = None
    if i is None:
        raise TypeError(f"{op}: {name} must be an int >= {low}, got {v!r}")
    if i < low:
        raise ValueError(f"{op}: {name} must be an int >= {low}, got {v!r}")
    return int(i)


def _positive(op: str, name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {v!r}")
    f = float(v)
    if not f > 0 or f == float("inf"):
        raise ValueError(f"{op}: {name} must be a positive finite number, got {v!r}")
    return f


def pyin_observations(
    yin: GPUArray,
    shifts: GPUArray,
    thresholds: GPUArray,
    beta_probs: GPUArray,
    *,
    min_period: int,
    sr: float,
    fmin: float,
    n_pitch_bins: int,
    bins_per_semitone: int,
    boltzmann: float,
    no_trough_prob: float,
) -> tuple[GPUArray, GPUArray]:
    """(obs float64 [rows, 2 * n_pitch_bins], voiced_prob float64 [rows]) from yin and shifts
    [rows, periods]; see the module docstring."""
    op = "pyin_observations"
    for name, a in (("yin", yin), ("shifts", shifts)):
        chk.array(op, name, a)
        if a.dtype.name not in ("float32", "float64"):
            raise TypeError(f"{op}: {name} must be a float32 or float64 array, got {chk.desc(a)}")
    if yin.ndim != 2 or not 2 <= yin.shape[1] <= MAX_PERIODS:
        raise ValueError(
            f"{op}: yin must be [rows, periods] with 2 <= periods <= {MAX_PERIODS}, got "
            f"{chk.desc(yin)}"
        )
    if shifts.shape != yin.shape or shifts.dtype is not yin.dtype:
        raise ValueError(f"{op}: shifts must match yin ({chk.desc(yin)}), got {chk.desc(shifts)}")
    for name, a in (("thresholds", thresholds), ("beta_probs", beta_probs)):
        chk.array(op, name, a)
        if a.dtype.name != "float64" or a.ndim != 1 or a.shape[0] < 1:
            raise ValueError(f"{op}: {name} must be a float64 [n_thresholds] array, got "
                             f"{chk.desc(a)}")  # fmt: skip
    if beta_probs.shape != thresholds.shape:
        raise ValueError(
            f"{op}: beta_probs must match thresholds {thresholds.shape}, got {chk.desc(beta_probs)}"
        )
    params = {
        "min_period": _int(op, "min_period", min_period, 0),
        "sr": _positive(op, "sr", sr),
        "fmin": _positive(op, "fmin", fmin),
        "n_pitch_bins": _int(op, "n_pitch_bins", n_pitch_bins, 1),
        "bins_per_semitone": _int(op, "bins_per_semitone", bins_per_semitone, 1),
        "boltzmann": _positive(op, "boltzmann", boltzmann),
        "no_trough_prob": _positive(op, "no_trough_prob", no_trough_prob),
    }
    res = run(op, (yin, shifts, thresholds, beta_probs), params)
    return res[0], res[1]
