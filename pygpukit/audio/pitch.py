"""Fundamental frequency estimation in librosa's names (librosa.core.pitch): yin, pyin.

Both start with YIN's cumulative mean normalized difference (CMND) of every frame, on the device
in frame-major layout ([batch * frames, lags], lags contiguous), as librosa computes it:

- the autocorrelation r[k] of each frame by FFT: gp.fft.rfft of the zero-padded frame (to
  scipy.fft.next_fast_len(2 * frame_length - 1, real=True), librosa.autocorrelate's size), its
  power spectrum, gp.fft.irfft;
- librosa's difference function d[k] = 2 (r[0] - r[k]) - sum_{m < k} y[m]^2 (the energy sum a
  log-step prefix scan of the squared frame, _scan.geometric_filter with a = 1), except d[1] =
  2 (r[0] - r[1]): librosa zeroes the energy term of k = 1, and so does this code;
- CMND[k] = d[k] / (mean(d[1..k]) + tiny) for k = min_period .. max_period (another scan);
- the parabolic interpolation shift -b / a of every lag (0 where |b| >= |a| and at the ends) and
  the troughs (librosa.util.localmin, the first lag a trough when below the second), from
  strided views of the CMND.

yin then picks, per frame, the first trough below trough_threshold (else the global minimum)
with routed reductions (argmax of the trough mask, argmax of -CMND) and reads its shift through
a one-hot sum; f0 = sr / (min_period + index + shift). pyin turns each frame into observation
probabilities with the routed op gp.pyin_observations (Triton on CUDA) and decodes the voiced /
unvoiced pitch path with the routed op gp.viterbi; the transition matrix, the beta prior and the
pitch grid depend only on the parameters and are built on the host (_pyin_tables.py).
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from pygpukit import fft as gfft
from pygpukit import ops
from pygpukit.array import GPUArray, view_as_complex
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio import _pyin_tables as tables
from pygpukit.audio._complex import abs2
from pygpukit.audio._scan import geometric_filter
from pygpukit.audio._tables import device_table
from pygpukit.creation import empty, from_numpy
from pygpukit.dtypes import bool_, float64
from pygpukit.ops.pitch import MAX_PERIODS, pyin_observations
from pygpukit.ops.sequence import viterbi

__all__ = ["pyin", "yin"]


class _Deprecated:
    """librosa.util.Deprecated: the default of a parameter that only warns when given."""

    def __repr__(self) -> str:
        return "<DEPRECATED parameter>"


_DEPRECATED: Any = _Deprecated()

# pyin's HMM tables on the device, by (bins, transition width, switch_prob, device): the
# transition matrix is [2 bins, 2 bins] float64 (11.6 MB at the defaults), which takes longer to
# build and to hash (_tables.device_table's key) than the device work of a few seconds of audio.
# Read-only by convention, as _tables' arrays.
_HMM_CACHE: OrderedDict[tuple[Any, ...], tuple[GPUArray, GPUArray]] = OrderedDict()
_HMM_MAX = 4
_hmm_lock = threading.Lock()


class _Params:
    """The checked arguments yin and pyin share, with librosa's derived periods."""

    __slots__ = (
        "center",
        "fmax",
        "fmin",
        "frame_length",
        "hop",
        "max_period",
        "min_period",
        "pad_mode",
        "sr",
    )

    def __init__(
        self,
        fn: str,
        y: GPUArray,
        fmin: Any,
        fmax: Any,
        sr: Any,
        frame_length: Any,
        win_length: Any,
        hop_length: Any,
        center: Any,
        pad_mode: Any,
    ) -> None:
        if fmin is None or fmax is None:
            raise ValueError(f'{fn}: both "fmin" and "fmax" must be provided')
        self.fmin = chk.number(fn, "fmin", fmin)
        self.fmax = chk.number(fn, "fmax", fmax)
        self.sr = chk.number(fn, "sr", sr, positive=True)
        self.frame_length = int(chk.positive_int(fn, "frame_length", frame_length) or 0)
        if hop_length is None:
            hop_length = self.frame_length // 4
            if hop_length <= 0:
                raise ValueError(
                    f"{fn}: hop_length defaults to frame_length // 4 = 0; pass hop_length > 0"
                )
        self.hop = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
        if not isinstance(center, (bool, np.bool_)):
            raise TypeError(f"{fn}: center must be a bool, got {type(center).__name__}")
        self.center = bool(center)
        chk.choice(fn, "pad_mode", pad_mode, _frames.PAD_MODES)
        self.pad_mode = pad_mode
        _check_yin_params(fn, self.sr, self.fmin, self.fmax, self.frame_length)
        if not isinstance(win_length, _Deprecated):
            warnings.warn(
                f"{fn}: the win_length parameter has been deprecated in librosa 0.11.0 and has "
                "no effect",
                category=FutureWarning,
                stacklevel=3,
            )
        self.min_period = int(np.floor(self.sr / self.fmax))
        self.max_period = min(int(np.ceil(self.sr / self.fmin)), self.frame_length - 1)
        n = y.shape[-1]
        if self.center:
            _frames.check_pad(fn, n, self.frame_length // 2, self.pad_mode)
        elif n < self.frame_length:
            raise ValueError(
                f"{fn}: input is too short (n={n}) for frame_length={self.frame_length} with "
                "center=False"
            )

    @property
    def n_periods(self) -> int:
        return self.max_period - self.min_period + 1


def _check_yin_params(fn: str, sr: float, fmin: float, fmax: float, frame_length: int) -> None:
    """librosa's __check_yin_params: 0 < fmin < fmax <= sr / 2 and one period of fmin in a
    frame (an error), two periods (a warning)."""
    if fmax > sr / 2:
        raise ValueError(f"{fn}: fmax={fmax:.3f} cannot exceed the Nyquist frequency sr/2={sr / 2}")
    if fmin >= fmax:
        raise ValueError(f"{fn}: fmin={fmin:.3f} must be less than fmax={fmax:.3f}")
    if fmin <= 0:
        raise ValueError(f"{fn}: fmin={fmin:.3f} must be strictly positive")
    if sr / fmin >= frame_length - 1:
        raise ValueError(
            f"{fn}: fmin={fmin:.3f} is too small for frame_length={frame_length} and sr={sr}; "
            f"increase fmin to {sr / (frame_length - 1):.3f} or frame_length to "
            f"{int(np.ceil(sr / fmin) + 1)}"
        )
    if sr / fmin >= frame_length // 2:
        warnings.warn(
            f"{fn}: with fmin={fmin:.3f}, sr={sr} and frame_length={frame_length}, less than two "
            "periods of fmin fit into the frame, which can cause inaccurate pitch detection; "
            f"consider fmin={sr / (frame_length / 2):.3f} or frame_length="
            f"{int(np.ceil(sr / fmin) * 2 + 1)}",
            stacklevel=3,
        )


def _fast_len(n: int) -> int:
    """scipy.fft.next_fast_len(n, real=True): the smallest 2^a 3^b 5^c >= n."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            q = p35
            while q < n:
                q *= 2
            best = min(best, q)
            p35 *= 3
        p5 *= 5
    return best


def _hmm_tables(n_pitch: int, width: int, switch: float, dev: Any) -> tuple[GPUArray, GPUArray]:
    """(log transition, log initial distribution) on dev, built and uploaded once per key."""
    key = (n_pitch, width, switch, str(dev))
    with _hmm_lock:
        hit = _HMM_CACHE.get(key)
        if hit is not None:
            _HMM_CACHE.move_to_end(key)
            return hit
    # librosa.sequence.viterbi's epsilon: the tiny of the observations' dtype (float64)
    tiny = float(np.finfo(np.float64).tiny)
    pair = (
        from_numpy(tables.log_transition(n_pitch, width, switch, tiny), device=dev),
        from_numpy(tables.log_init(2 * n_pitch, tiny), device=dev),
    )
    with _hmm_lock:
        _HMM_CACHE[key] = pair
        while len(_HMM_CACHE) > _HMM_MAX:
            _HMM_CACHE.popitem(last=False)
    return pair


def _frames_of(x: GPUArray, p: _Params) -> tuple[GPUArray, tuple[int, ...]]:
    """The frames [batch, frames, frame_length] (a strided view) and y's leading dims."""
    y2, lead = _frames.as_rows(x)
    if p.center:
        pad = p.frame_length // 2
        y2 = _frames.pad_rows(y2, pad, pad, p.pad_mode)
    return _frames.frame_view(y2, p.frame_length, p.hop), lead


def _cmnd(frames: GPUArray, p: _Params) -> GPUArray:
    """librosa's _cumulative_mean_normalized_difference, [batch * frames, n_periods]."""
    b, m, w = frames.shape
    rows = b * m
    top = p.max_period
    n_pad = _fast_len(2 * w - 1)
    power = abs2(gfft.rfft(frames, n=n_pad, axis=-1))
    spec = empty((*power.shape, 2), power.dtype, power.device)
    spec[..., 0] = power
    spec[..., 1] = 0.0
    acf = gfft.irfft(view_as_complex(spec), n=n_pad, axis=-1)[..., : top + 1]
    acf = acf.reshape(rows, top + 1)
    head = frames[:, :, :top].reshape(rows, top)
    energy = geometric_filter(head * head, 1.0)  # energy[k - 1] = sum_{m < k} y[m]^2
    # librosa zeroes its energy row 0 before reading rows 0 .. max_period - 1, so d[1] is
    # 2 (r[0] - r[1]) without the y[0]^2 term (kept: the results are librosa's)
    energy[:, :1] = 0.0
    d = ops.sub((acf[:, :1] - acf[:, 1:]) * 2.0, energy)  # d[k - 1], k = 1 .. max_period
    lags = device_table(np.arange(1, top + 1, dtype=np.float64), d.dtype.np_dtype, d.device)
    mean = geometric_filter(d, 1.0) / lags
    lo = p.min_period - 1
    tiny = float(np.finfo(d.dtype.np_dtype).tiny)
    return d[:, lo:top] / (mean[:, lo:top] + tiny)


def _parabolic_shifts(x: GPUArray) -> GPUArray:
    """librosa's _parabolic_interpolation along the last axis: -b / a with a = x[i + 1] +
    x[i - 1] - 2 x[i], b = (x[i + 1] - x[i - 1]) / 2, 0 where |b| >= |a| and at both ends."""
    rows, n = x.shape
    shifts = empty((rows, n), x.dtype, x.device)
    shifts[:, :1] = 0.0
    shifts[:, n - 1 :] = 0.0
    if n > 2:
        nxt, prv, mid = x[:, 2:], x[:, : n - 2], x[:, 1 : n - 1]
        a = (nxt + prv) - mid * 2.0
        b = (nxt - prv) / 2.0
        flat = ops.abs(b) >= ops.abs(a)
        ops.where(flat, 0.0, -(b / ops.where(flat, 1.0, a)), out=shifts[:, 1 : n - 1])
    return shifts


def _troughs(x: GPUArray) -> GPUArray:
    """librosa.util.localmin along the last axis, the first lag a trough when below the second."""
    rows, n = x.shape
    t = empty((rows, n), bool_, x.device)
    ops.lt(x[:, :1], x[:, 1:2], out=t[:, :1])
    ops.lt(x[:, n - 1 :], x[:, n - 2 : n - 1], out=t[:, n - 1 :])
    if n > 2:
        mid = x[:, 1 : n - 1]
        ops.where(mid < x[:, : n - 2], mid <= x[:, 2:], False, out=t[:, 1 : n - 1])
    return t


def yin(
    y: Any,
    *,
    fmin: float,
    fmax: float,
    sr: float = 22050,
    frame_length: int = 2048,
    win_length: Any = _DEPRECATED,
    hop_length: int | None = None,
    trough_threshold: float = 0.1,
    center: bool = True,
    pad_mode: str = "constant",
) -> GPUArray:
    """librosa.yin: the fundamental frequency [..., frames] of y [..., samples] by YIN.

    Frames of frame_length samples every hop_length (default frame_length // 4; y padded by
    frame_length // 2 on both sides when center, pad_mode 'constant', 'reflect', 'symmetric' or
    'edge'); in each, the cumulative mean normalized difference over the periods
    floor(sr / fmax) .. ceil(sr / fmin) (see the module docstring), its first trough below
    trough_threshold or else its global minimum, refined by parabolic interpolation:
    f0 = sr / period. Requires 0 < fmin < fmax <= sr / 2 and sr / fmin < frame_length - 1
    (ValueError), warns when fewer than two periods of fmin fit a frame; win_length is
    deprecated in librosa 0.11 and only warns (FutureWarning).

    Deviations: f0 has y's dtype (librosa returns float64), computed in that dtype (float32 or
    float64, on the GPU too);
    the prefix sums are log-step scans (their rounding grows like log2(frame_length) instead of
    frame_length); 'reflect'/'symmetric' padding needs a signal longer than frame_length // 2;
    no finiteness check of y (librosa's valid_audio).
    """
    fn = "yin"
    x = chk.signal(fn, "y", y)
    p = _Params(fn, x, fmin, fmax, sr, frame_length, win_length, hop_length, center, pad_mode)
    thr = chk.number(fn, "trough_threshold", trough_threshold)

    frames, lead = _frames_of(x, p)
    n_frames = frames.shape[1]
    cmnd = _cmnd(frames, p)
    shifts = _parabolic_shifts(cmnd)
    troughs = _troughs(cmnd)
    below = ops.where(troughs, cmnd < thr, False)
    first = ops.argmax(below, axis=-1)
    deepest = ops.argmax(-cmnd, axis=-1)
    index = ops.where(ops.max(below, axis=-1), first, deepest)
    lags = device_table(np.arange(p.n_periods, dtype=np.int64), np.int64, x.device)
    shift = ops.sum(ops.where(lags == index.reshape(-1, 1), shifts, 0.0), axis=-1)
    period = (index + p.min_period).astype(cmnd.dtype) + shift
    f0 = p.sr / period
    return f0.reshape(*lead, n_frames)


def _check_pyin(
    fn: str,
    n_thresholds: Any,
    beta_parameters: Any,
    boltzmann_parameter: Any,
    resolution: Any,
    max_transition_rate: Any,
    switch_prob: Any,
    no_trough_prob: Any,
    fill_na: Any,
) -> tuple[int, tuple[float, float], float, float, float, float, float, float | None]:
    n_thr = int(chk.positive_int(fn, "n_thresholds", n_thresholds) or 0)
    if not isinstance(beta_parameters, (tuple, list)) or len(beta_parameters) != 2:
        raise TypeError(f"{fn}: beta_parameters must be a pair of numbers, got {beta_parameters!r}")
    beta = (
        chk.number(fn, "beta_parameters[0]", beta_parameters[0], positive=True),
        chk.number(fn, "beta_parameters[1]", beta_parameters[1], positive=True),
    )
    boltz = chk.number(fn, "boltzmann_parameter", boltzmann_parameter, positive=True)
    res = chk.number(fn, "resolution", resolution, positive=True)
    if res >= 1:
        raise ValueError(f"{fn}: resolution must be in (0, 1), got {resolution!r}")
    rate = chk.number(fn, "max_transition_rate", max_transition_rate, positive=True)
    probs = []
    for name, v in (("switch_prob", switch_prob), ("no_trough_prob", no_trough_prob)):
        f = chk.number(fn, name, v)
        if not 0 < f < 1:
            raise ValueError(f"{fn}: {name} must be in (0, 1), got {v!r}")
        probs.append(f)
    if fill_na is not None and (
        isinstance(fill_na, bool) or not isinstance(fill_na, (int, float, np.integer, np.floating))
    ):
        raise TypeError(f"{fn}: fill_na must be None or a number, got {type(fill_na).__name__}")
    fill = None if fill_na is None else float(fill_na)
    return n_thr, beta, boltz, res, rate, probs[0], probs[1], fill


def pyin(
    y: Any,
    *,
    fmin: float,
    fmax: float,
    sr: float = 22050,
    frame_length: int = 2048,
    win_length: Any = _DEPRECATED,
    hop_length: int | None = None,
    n_thresholds: int = 100,
    beta_parameters: tuple[float, float] = (2, 18),
    boltzmann_parameter: float = 2,
    resolution: float = 0.1,
    max_transition_rate: float = 35.92,
    switch_prob: float = 0.01,
    no_trough_prob: float = 0.01,
    fill_na: float | None = math.nan,
    center: bool = True,
    pad_mode: str = "constant",
) -> tuple[GPUArray, GPUArray, GPUArray]:
    """librosa.pyin: (f0, voiced_flag, voiced_prob), each [..., frames], by probabilistic YIN.

    The frames and the cumulative mean normalized difference are yin's (same framing arguments
    and checks). Each frame's troughs become f0 candidates weighted by a beta(beta_parameters)
    prior over n_thresholds thresholds and a Boltzmann(boltzmann_parameter) prior over the
    troughs below each (gp.pyin_observations, on the device); an HMM over pitch bins
    (resolution semitones, from fmin) x {voiced, unvoiced}, with a triangular local transition
    of max_transition_rate octaves per second and switch_prob between voicing states, is decoded
    by Viterbi (gp.viterbi, on the device). f0 is the decoded bin's frequency (fill_na where
    unvoiced unless fill_na is None), voiced_flag whether the decoded state is voiced,
    voiced_prob the frame's total voiced probability.

    Deviations: f0 and voiced_prob have y's dtype (librosa returns float64), voiced_flag is a
    bool GPUArray; the CMND runs in y's dtype (see yin), the probabilities and the Viterbi
    recursion in float64 as in librosa; the beta prior's CDF is computed by its continued
    fraction, not scipy (within 1e-14); no finiteness check of y.
    """
    fn = "pyin"
    x = chk.signal(fn, "y", y)
    p = _Params(fn, x, fmin, fmax, sr, frame_length, win_length, hop_length, center, pad_mode)
    n_thr, beta, boltz, res, rate, switch, no_trough, fill = _check_pyin(
        fn,
        n_thresholds,
        beta_parameters,
        boltzmann_parameter,
        resolution,
        max_transition_rate,
        switch_prob,
        no_trough_prob,
        fill_na,
    )
    if p.n_periods > MAX_PERIODS:
        raise ValueError(
            f"{fn}: fmin={p.fmin} and fmax={p.fmax} at sr={p.sr} span {p.n_periods} periods; "
            f"at most {MAX_PERIODS} are served"
        )
    per_semitone, n_pitch, freqs = tables.pitch_grid(p.fmin, p.fmax, res)
    width = tables.transition_width(rate, p.hop, p.sr, per_semitone)
    if n_pitch < 2 or width > n_pitch:
        raise ValueError(
            f"{fn}: the pitch grid has {n_pitch} bins but the transition spans {width} "
            "(librosa.sequence.transition_local needs 2 <= width <= bins); widen fmin..fmax, "
            "refine resolution or lower max_transition_rate"
        )

    frames, lead = _frames_of(x, p)
    batch, n_frames = frames.shape[0], frames.shape[1]
    cmnd = _cmnd(frames, p)
    shifts = _parabolic_shifts(cmnd)
    dev = x.device
    thresholds, beta_probs = tables.threshold_prior(n_thr, beta[0], beta[1])
    obs, voiced_prob = pyin_observations(
        cmnd,
        shifts,
        device_table(thresholds, np.float64, dev),
        device_table(beta_probs, np.float64, dev),
        min_period=p.min_period,
        sr=p.sr,
        fmin=p.fmin,
        n_pitch_bins=n_pitch,
        bins_per_semitone=per_semitone,
        boltzmann=boltz,
        no_trough_prob=no_trough,
    )
    # librosa.sequence.viterbi: log(p + tiny) of every table, tiny the observations' (float64)
    tiny = float(np.finfo(np.float64).tiny)
    log_obs = ops.log(obs + tiny).reshape(batch, n_frames, 2 * n_pitch)
    log_trans, log_init = _hmm_tables(n_pitch, width, switch, dev)
    states = viterbi(log_obs, log_trans, log_init)

    voiced = states < n_pitch
    bins = ops.where(voiced, states, states - n_pitch)
    f0 = ops.embedding(bins, device_table(freqs.reshape(-1, 1), x.dtype.np_dtype, dev))
    f0 = f0.reshape(batch, n_frames)
    if fill is not None:
        f0 = ops.where(voiced, f0, fill)
    vp = voiced_prob.astype(x.dtype) if x.dtype is not float64 else voiced_prob
    return (
        f0.reshape(*lead, n_frames),
        voiced.reshape(*lead, n_frames),
        vp.reshape(*lead, n_frames),
    )
