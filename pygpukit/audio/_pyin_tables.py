"""pyin's parameter-only tables, built on the host in float64 (they never depend on the signal):
the threshold grid and its beta prior, the pitch grid, and the HMM's transition matrix and
initial distribution (librosa.sequence.transition_local / transition_loop, np.kron).

The beta prior needs the regularized incomplete beta function (scipy.stats.beta.cdf in
librosa); scipy is no dependency here, so it is evaluated by its continued fraction (modified
Lentz), which converges to float64 precision in a few dozen terms for the shape parameters pyin
uses.
"""

from __future__ import annotations

import math

import numpy as np

from pygpukit.audio.filters import window_np

__all__ = ["beta_cdf", "log_init", "log_transition", "pitch_grid", "threshold_prior"]

_EPS = 1e-16
_FPMIN = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
        c = 1.0 + aa / c
        c = c if abs(c) > _FPMIN else _FPMIN
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
        c = 1.0 + aa / c
        c = c if abs(c) > _FPMIN else _FPMIN
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def beta_cdf(x: np.ndarray, a: float, b: float) -> np.ndarray:
    """scipy.stats.beta.cdf(x, a, b): the regularized incomplete beta function I_x(a, b)."""
    out = np.empty(x.shape, dtype=np.float64)
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    for i, xi in enumerate(np.asarray(x, dtype=np.float64)):
        if xi <= 0.0:
            out[i] = 0.0
        elif xi >= 1.0:
            out[i] = 1.0
        else:
            front = math.exp(log_norm + a * math.log(xi) + b * math.log1p(-xi))
            # The fraction converges fast for x < (a + 1) / (a + b + 2); beyond, the symmetry
            # I_x(a, b) = 1 - I_(1-x)(b, a).
            if xi < (a + 1.0) / (a + b + 2.0):
                out[i] = front * _beta_cf(a, b, xi) / a
            else:
                out[i] = 1.0 - front * _beta_cf(b, a, 1.0 - xi) / b
    return out


def threshold_prior(n_thresholds: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """(thresholds[1:], beta_probs): librosa's np.linspace(0, 1, n + 1) grid without its 0 and
    the beta distribution's mass between consecutive thresholds."""
    thresholds = np.linspace(0, 1, n_thresholds + 1)
    return thresholds[1:].copy(), np.diff(beta_cdf(thresholds, a, b))


def pitch_grid(fmin: float, fmax: float, resolution: float) -> tuple[int, int, np.ndarray]:
    """(bins per semitone, pitch bins, their frequencies in Hz) as librosa.pyin sets them."""
    per_semitone = int(np.ceil(1.0 / resolution))
    n_pitch = int(np.floor(12 * per_semitone * np.log2(fmax / fmin))) + 1
    freqs = fmin * 2 ** (np.arange(n_pitch) / (12 * per_semitone))
    return per_semitone, n_pitch, freqs


def transition_width(max_transition_rate: float, hop_length: int, sr: float, per: int) -> int:
    """The local transition's width in pitch bins (librosa.pyin: Python's round, half to even)."""
    return round(max_transition_rate * 12 * hop_length / sr) * per + 1


def log_transition(n_pitch: int, width: int, switch_prob: float, tiny: float) -> np.ndarray:
    """log(transition + tiny) [2 n_pitch, 2 n_pitch]: librosa.sequence.transition_local(n_pitch,
    width, window='triangle', wrap=False) inside each voicing state, np.kron with
    transition_loop(2, 1 - switch_prob) across them; tiny is librosa.sequence.viterbi's epsilon
    (the observation probabilities' tiny)."""
    window = window_np("pyin", "triangle", width, fftbins=False)
    lpad = (n_pitch - width) // 2
    row = np.pad(window, (lpad, n_pitch - width - lpad))
    local = np.zeros((n_pitch, n_pitch), dtype=np.float64)
    for i in range(n_pitch):
        r = np.roll(row, n_pitch // 2 + i + 1)
        r[min(n_pitch, i + width // 2 + 1) :] = 0
        r[: max(0, i - width // 2)] = 0
        local[i] = r
    local /= local.sum(axis=1, keepdims=True)
    stay = 1.0 - switch_prob
    loop = np.array([[stay, 1.0 - stay], [1.0 - stay, stay]])
    return np.asarray(np.log(np.kron(loop, local) + tiny))


def log_init(n_states: int, tiny: float) -> np.ndarray:
    """log(p_init + tiny) for pyin's uniform initial distribution."""
    return np.asarray(np.log(np.ones(n_states) / n_states + tiny))
