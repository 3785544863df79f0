"""Unit conversions in librosa's names: Hz <-> mel, power/amplitude <-> dB.

hz_to_mel and mel_to_hz take a GPUArray (and return one, computed with routed ops) or anything
NumPy takes (and return NumPy float64, exactly as librosa does); filter design calls the NumPy
form. The dB conversions take GPUArrays (NumPy arrays are uploaded to the default device) and
compute in the input's float dtype.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio._complex import magnitude
from pygpukit.creation import from_numpy

__all__ = [
    "amplitude_to_db",
    "db_to_amplitude",
    "db_to_power",
    "fft_frequencies",
    "hz_to_mel",
    "mel_frequencies",
    "mel_to_hz",
    "power_to_db",
]

# Slaney's Auditory Toolbox mel scale (librosa's default, htk=False): linear below 1 kHz,
# logarithmic above, 27 steps per factor 6.4.
_F_SP = 200.0 / 3
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0
_DB_PER_LN = 10.0 / math.log(10.0)  # 10 * log10(x) = _DB_PER_LN * ln(x)


def hz_to_mel(frequencies: Any, *, htk: bool = False) -> Any:
    """Hz to mels (librosa.hz_to_mel): HTK's 2595 * log10(1 + f / 700) or Slaney's scale."""
    if isinstance(frequencies, GPUArray):
        f = frequencies
        if htk:
            return ops.log(f * (1.0 / 700.0) + 1.0) * (2595.0 / math.log(10.0))
        # The log branch is evaluated everywhere (NaN/-inf below 0 Hz) and masked by where.
        logmel = ops.log(f * (1.0 / _MIN_LOG_HZ)) * (1.0 / _LOGSTEP) + _MIN_LOG_MEL
        return ops.where(f >= _MIN_LOG_HZ, logmel, f * (1.0 / _F_SP))
    freq = np.asanyarray(frequencies, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + freq / 700.0)
    mels = freq / _F_SP
    if freq.ndim:
        log_t = freq >= _MIN_LOG_HZ
        mels[log_t] = _MIN_LOG_MEL + np.log(freq[log_t] / _MIN_LOG_HZ) / _LOGSTEP
    elif freq >= _MIN_LOG_HZ:
        mels = _MIN_LOG_MEL + np.log(freq / _MIN_LOG_HZ) / _LOGSTEP
    return mels


def mel_to_hz(mels: Any, *, htk: bool = False) -> Any:
    """Mels to Hz (librosa.mel_to_hz), the inverse of hz_to_mel."""
    if isinstance(mels, GPUArray):
        m = mels
        if htk:
            return (ops.exp(m * (math.log(10.0) / 2595.0)) - 1.0) * 700.0
        loghz = ops.exp((m - _MIN_LOG_MEL) * _LOGSTEP) * _MIN_LOG_HZ
        return ops.where(m >= _MIN_LOG_MEL, loghz, m * _F_SP)
    mel = np.asanyarray(mels, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    freqs = _F_SP * mel
    if mel.ndim:
        log_t = mel >= _MIN_LOG_MEL
        freqs[log_t] = _MIN_LOG_HZ * np.exp(_LOGSTEP * (mel[log_t] - _MIN_LOG_MEL))
    elif mel >= _MIN_LOG_MEL:
        freqs = _MIN_LOG_HZ * np.exp(_LOGSTEP * (mel - _MIN_LOG_MEL))
    return freqs


def mel_frequencies_np(n_mels: int, fmin: float, fmax: float, htk: bool) -> np.ndarray:
    """n_mels centre frequencies (Hz, float64) evenly spaced on the mel scale."""
    min_mel = hz_to_mel(fmin, htk=htk)
    max_mel = hz_to_mel(fmax, htk=htk)
    return np.asarray(mel_to_hz(np.linspace(min_mel, max_mel, n_mels), htk=htk))


def mel_frequencies(
    n_mels: int = 128,
    *,
    fmin: float = 0.0,
    fmax: float = 11025.0,
    htk: bool = False,
    device: Any = None,
) -> GPUArray:
    """librosa.mel_frequencies as a float64 GPUArray on ``device`` (default device)."""
    fn = "mel_frequencies"
    n = chk.positive_int(fn, "n_mels", n_mels)
    lo = chk.number(fn, "fmin", fmin)
    hi = chk.number(fn, "fmax", fmax)
    return from_numpy(mel_frequencies_np(int(n or 0), lo, hi, bool(htk)), device=device)


def fft_frequencies(*, sr: float = 22050, n_fft: int = 2048, device: Any = None) -> GPUArray:
    """librosa.fft_frequencies: the 1 + n_fft // 2 rfft bin centres (Hz) as a float64 GPUArray."""
    fn = "fft_frequencies"
    rate = chk.number(fn, "sr", sr, positive=True)
    n = chk.positive_int(fn, "n_fft", n_fft)
    return from_numpy(np.fft.rfftfreq(int(n or 0), d=1.0 / rate), device=device)


# ----- decibels -------------------------------------------------------------------------------

# librosa users pass NumPy's reductions as ref (ref=np.max); they map to the routed reductions,
# which, like NumPy's, reduce over every element (all rows of a batch together).
_REDUCTIONS: dict[Any, Callable[[GPUArray], GPUArray]] = {
    np.max: ops.max,
    np.amax: ops.max,
    np.min: ops.min,
    np.amin: ops.min,
    np.mean: ops.mean,
}


def _real_input(fn: str, name: str, x: Any) -> GPUArray:
    if isinstance(x, np.ndarray) and x.dtype.kind == "c":
        x = from_numpy(np.ascontiguousarray(x))
    if isinstance(x, GPUArray) and x.dtype.is_complex:
        warnings.warn(
            f"{fn} was called on complex input so phase information will be discarded. To "
            "suppress this warning, call magphase(D)[0] instead.",
            stacklevel=3,
        )
        return magnitude(x)
    return chk.signal(fn, name, x, min_ndim=0)


def _ref_value(fn: str, ref: Any, x: GPUArray) -> Any:
    """|ref| as a Python float, or a GPUArray (a callable ref, or an array ref)."""
    if callable(ref):
        reduce = _REDUCTIONS.get(ref)
        value = reduce(x) if reduce is not None else ref(x)
        return ops.abs(value) if isinstance(value, GPUArray) else math.fabs(float(value))
    if isinstance(ref, (GPUArray, np.ndarray)):
        return ops.abs(chk.signal(fn, "ref", ref, min_ndim=0))
    return math.fabs(chk.number(fn, "ref", ref))


def _check_db_args(fn: str, amin: Any, top_db: Any) -> tuple[float, float | None]:
    a = chk.number(fn, "amin", amin, positive=True)
    t = chk.number(fn, "top_db", top_db, allow_none=True)
    if t is not None and t < 0:
        raise ValueError(f"{fn}: top_db must be non-negative, got {top_db!r}")
    return a, t


def _to_db(fn: str, power: GPUArray, ref_value: Any, amin: float, top_db: float | None) -> GPUArray:
    log_spec = ops.log(ops.maximum(power, amin)) * _DB_PER_LN
    if isinstance(ref_value, GPUArray):
        log_spec = log_spec - ops.log(ops.maximum(ref_value, amin)) * _DB_PER_LN
    else:
        log_spec = log_spec - _DB_PER_LN * math.log(max(amin, ref_value))
    if top_db is not None:
        # One threshold over the whole array (all rows of a batch), as librosa's log_spec.max().
        log_spec = ops.maximum(log_spec, ops.max(log_spec) - top_db)
    return log_spec


def power_to_db(
    S: Any, *, ref: Any = 1.0, amin: float = 1e-10, top_db: float | None = 80.0
) -> GPUArray:
    """librosa.power_to_db: 10 * log10(max(amin, S) / max(amin, |ref|)), floored at
    max - top_db over the whole array.

    ref may be a number, an array, or a callable applied to S; np.max/np.amax/np.min/np.amin/
    np.mean run as the routed reductions (over every element, as NumPy's). A complex S is
    replaced by |S| (librosa warns and does the same).
    """
    fn = "power_to_db"
    a, t = _check_db_args(fn, amin, top_db)
    x = _real_input(fn, "S", S)
    return _to_db(fn, x, _ref_value(fn, ref, x), a, t)


def amplitude_to_db(
    S: Any, *, ref: Any = 1.0, amin: float = 1e-5, top_db: float | None = 80.0
) -> GPUArray:
    """librosa.amplitude_to_db: 20 * log10(|S| / ref), i.e. power_to_db(|S|**2, ref=ref**2,
    amin=amin**2, top_db=top_db). A callable ref is applied to |S|."""
    fn = "amplitude_to_db"
    a, t = _check_db_args(fn, amin, top_db)
    x = _real_input(fn, "S", S)
    mag = ops.abs(x)
    rv = _ref_value(fn, ref, mag)
    rv2 = rv * rv
    return _to_db(fn, mag * mag, rv2, a * a, t)


def db_to_power(S_db: Any, *, ref: float = 1.0) -> GPUArray:
    """librosa.db_to_power: ref * 10 ** (S_db / 10)."""
    fn = "db_to_power"
    x = chk.signal(fn, "S_db", S_db, min_ndim=0)
    r = chk.number(fn, "ref", ref)
    return ops.exp(x * (0.1 * math.log(10.0))) * r


def db_to_amplitude(S_db: Any, *, ref: float = 1.0) -> GPUArray:
    """librosa.db_to_amplitude: ref * 10 ** (S_db / 20) (= db_to_power(S_db, ref=ref**2)**0.5)."""
    fn = "db_to_amplitude"
    x = chk.signal(fn, "S_db", S_db, min_ndim=0)
    r = chk.number(fn, "ref", ref)
    return ops.exp(x * (0.05 * math.log(10.0))) * math.fabs(r)
