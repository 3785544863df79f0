"""Onset detection in librosa's names (librosa.onset): onset_strength, onset_detect,
onset_backtrack.

onset_strength runs on the device in frame-major layout ([batch, frames, bands], bands
contiguous): log-power mel spectrogram (feature.melspectrogram + power_to_db), the local max
filter over bands (an edge-padded copy, a [.., bands, max_size] strided view and a max
reduction), the lagged difference, relu and the band aggregate (a reduction), the lag/centering
shift, and detrend's IIR filter as a log-step scan (_scan.geometric_filter). onset_detect picks
peaks in that envelope on the host: the rule is sequential (each pick skips the next ``wait``
frames) and the envelope is one value per frame, so it is downloaded once and the picking
follows librosa's peak_pick loop in NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio._scan import geometric_filter
from pygpukit.audio.convert import power_to_db
from pygpukit.audio.feature import melspectrogram
from pygpukit.creation import zeros

__all__ = ["onset_backtrack", "onset_detect", "onset_strength"]

# np reductions librosa users pass as aggregate, served by the routed reductions over bands.
_AGGREGATES: dict[Any, Callable[..., GPUArray]] = {
    np.mean: ops.mean,
    np.max: ops.max,
    np.amax: ops.max,
    np.min: ops.min,
    np.amin: ops.min,
    np.sum: ops.sum,
}
_PEAK_KWARGS = ("pre_max", "post_max", "pre_avg", "post_avg", "delta", "wait")


def _check_bool(fn: str, name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool, got {type(value).__name__}")


def _frame_major(s: GPUArray) -> tuple[GPUArray, tuple[int, ...]]:
    """[..., d, m] as [batch, m, d] (a view for the frame-major results of melspectrogram)."""
    lead = s.shape[:-2]
    return s.swapaxes(-1, -2).reshape(-1, s.shape[-1], s.shape[-2]), lead


def _max_filter(sf: GPUArray, size: int) -> GPUArray:
    """scipy.ndimage.maximum_filter1d(S, size, axis=-2) on frame-major [batch, m, d].

    The window of band i is [i - size // 2, i + (size - 1) // 2]. scipy's default mode
    'reflect' only ever adds bands that are already inside that window, so it equals the
    window clipped to the array, i.e. edge padding (the edge band is in the window too)."""
    b, m, d = sf.shape
    rows = _frames.pad_rows(sf.reshape(b * m, d).contiguous(), size // 2, (size - 1) // 2, "edge")
    return ops.max(_frames.frame_view(rows, size, 1), axis=-1).reshape(b, m, d)


def onset_strength(
    *,
    y: Any = None,
    sr: float = 22050,
    S: Any = None,
    lag: int = 1,
    max_size: int = 1,
    ref: Any = None,
    detrend: bool = False,
    center: bool = True,
    feature: Callable[..., Any] | None = None,
    aggregate: Any = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    **kwargs: Any,
) -> GPUArray:
    """librosa.onset.onset_strength: spectral flux onset envelope [..., frames].

    env[t] = aggregate_f max(0, S[f, t] - ref[f, t - lag]), S the log-power mel spectrogram
    power_to_db(melspectrogram(y=y, sr=sr, n_fft=n_fft, hop_length=hop_length, fmax=sr / 2,
    **kwargs)) (or the given S [..., bands, frames]), ref S's local max over max_size bands (or
    the given ref, S's shape). The envelope is shifted right by lag (plus n_fft // (2 *
    hop_length) when center) with zeros and cut to S's frame count when center; detrend applies
    librosa's DC-removal filter y[t] = x[t] - x[t - 1] + 0.99 y[t - 1].

    aggregate: None (np.mean), np.mean, np.max/np.amax, np.min/np.amin or np.sum (routed
    reductions over bands). feature: None (feature.melspectrogram on the device) or a callable
    taking (y=GPUArray, sr, n_fft, hop_length, **kwargs) and returning a GPUArray. As in
    librosa, power_to_db's 80 dB floor is taken over the whole array, so rows of a batch whose
    levels differ by more than that floor get other envelopes than alone; per row when it does
    not bind. n_fft and hop_length are onset_strength_multi's keywords (librosa passes them on).

    Deviations: a callable other than those aggregates raises TypeError (librosa calls it on
    NumPy data); channels (onset_strength_multi) is not served; detrend keeps S's dtype (scipy's
    lfilter returns float64).
    """
    fn = "onset_strength"
    if aggregate is False:
        raise ValueError(
            f"{fn}: aggregate cannot be False when computing full-spectrum onset strength"
        )
    agg = ops.mean if aggregate is None else _AGGREGATES.get(aggregate)
    if agg is None:
        raise TypeError(
            f"{fn}: aggregate must be None, np.mean, np.max, np.amax, np.min, np.amin or np.sum, "
            f"got {aggregate!r}"
        )
    rate = chk.number(fn, "sr", sr, positive=True)
    lag_ = int(chk.positive_int(fn, "lag", lag) or 0)
    size = int(chk.positive_int(fn, "max_size", max_size) or 0)
    nfft = int(chk.positive_int(fn, "n_fft", n_fft) or 0)
    hop = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
    _check_bool(fn, "detrend", detrend)
    _check_bool(fn, "center", center)
    if feature is not None and not callable(feature):
        raise TypeError(f"{fn}: feature must be None or a callable, got {type(feature).__name__}")
    ref_arr = None if ref is None else chk.signal(fn, "ref", ref, min_ndim=2)

    if S is not None:
        spec = chk.signal(fn, "S", S, min_ndim=2)
        if ref_arr is not None and ref_arr.shape != spec.shape:
            raise ValueError(f"{fn}: ref has shape {ref_arr.shape} but S has shape {spec.shape}")
    else:
        if y is None:
            raise ValueError(f"{fn}: pass either y (a signal) or S (a log-power spectrogram)")
        x = chk.signal(fn, "y", y)
        mel_kwargs = dict(kwargs)
        mel_kwargs.setdefault("fmax", 0.5 * rate)
        if feature is None:
            _check_ref_for_y(fn, ref_arr, x, hop, mel_kwargs)
            feat = melspectrogram(y=x, sr=rate, n_fft=nfft, hop_length=hop, **mel_kwargs)
        else:
            feat = chk.signal(
                fn,
                "feature(...)",
                feature(y=x, sr=rate, n_fft=nfft, hop_length=hop, **mel_kwargs),
                min_ndim=2,
            )
            feat = ops.abs(feat)
        spec = power_to_db(feat)
        if ref_arr is not None and ref_arr.shape != spec.shape:
            raise ValueError(f"{fn}: ref has shape {ref_arr.shape} but S has shape {spec.shape}")

    sf, lead = _frame_major(spec)
    batch, m, _ = sf.shape
    if ref_arr is not None:
        rf = _frame_major(ref_arr)[0]
    elif size > 1:
        rf = _max_filter(sf, size)
    else:
        rf = sf
    pad_width = lag_ + (nfft // (2 * hop) if center else 0)
    n_env = max(m - lag_, 0)
    total = min(pad_width + n_env, m) if center else pad_width + n_env
    env = zeros((batch, total), sf.dtype, sf.device)
    keep = total - pad_width
    if keep > 0:
        flux = ops.maximum(sf[:, lag_ : lag_ + keep, :] - rf[:, :keep, :], 0.0)
        agg(flux, axis=-1, out=env[:, pad_width:])
    if detrend:
        diff = env.copy()
        if total > 1:
            ops.sub(env[:, 1:], env[:, :-1], out=diff[:, 1:])
        env = geometric_filter(diff, 0.99)
    return env.reshape(*lead, total)


def _check_ref_for_y(
    fn: str, ref: GPUArray | None, x: GPUArray, hop: int, mel_kwargs: dict[str, Any]
) -> None:
    """ref's shape against the mel spectrogram y will give, before that runs."""
    if ref is None:
        return
    # melspectrogram's own center stays at True: onset_strength's center is not passed on.
    n_frames = 1 + x.shape[-1] // hop
    want = (*x.shape[:-1], mel_kwargs.get("n_mels", 128), n_frames)
    if ref.shape != want:
        raise ValueError(f"{fn}: ref has shape {ref.shape} but S will have shape {want}")


# ----- peak picking on the host ----------------------------------------------------------------


def _peak_params(fn: str, sr: float, hop: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """librosa.onset.onset_detect's peak_pick defaults, checked as librosa.util.peak_pick does
    (window sizes rounded up to ints)."""
    unknown = sorted(set(kwargs) - set(_PEAK_KWARGS))
    if unknown:
        raise TypeError(f"{fn}: unexpected keyword argument(s) {unknown}")
    p = {
        "pre_max": 0.03 * sr // hop,
        "post_max": 0.00 * sr // hop + 1,
        "pre_avg": 0.10 * sr // hop,
        "post_avg": 0.10 * sr // hop + 1,
        "wait": 0.03 * sr // hop,
        "delta": 0.07,
    }
    p.update(kwargs)
    out: dict[str, Any] = {}
    for name in _PEAK_KWARGS:
        v = chk.number(fn, name, p[name])
        positive = name in ("post_max", "post_avg")
        if (positive and v <= 0) or v < 0:
            need = "positive" if positive else "non-negative"
            raise ValueError(f"{fn}: {name} must be {need}, got {p[name]!r}")
        out[name] = v if name == "delta" else int(np.ceil(v))
    return out


def _threshold(x: np.ndarray, delta: Any) -> Any:
    """mean(x) + delta as librosa's compiled peak picker evaluates it: a sequential sum, the
    division and the add all in x's dtype (delta enters as float32); a NumPy scalar of that
    dtype, so the comparisons below round exactly as librosa's do (float32 ties matter)."""
    dt = x.dtype.type
    return np.cumsum(x, dtype=x.dtype)[-1] / dt(x.shape[0]) + dt(delta)


def _peak_pick_row(x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """librosa.util.peak_pick's loop (util.utils.__peak_pick) on one envelope; bool mask."""
    n_x = x.shape[0]
    pre_max, post_max, pre_avg, post_avg = p["pre_max"], p["post_max"], p["pre_avg"], p["post_avg"]
    wait = p["wait"]
    delta = np.float32(p["delta"])  # librosa's compiled signature takes delta as float32
    peaks = np.zeros(n_x, dtype=bool)
    peaks[0] = x[0] >= np.max(x[: min(post_max, n_x)])
    peaks[0] &= x[0] >= _threshold(x[: min(post_avg, n_x)], delta)
    n = wait + 1 if peaks[0] else 1
    while n < n_x:
        if x[n] != np.max(x[max(0, n - pre_max) : min(n + post_max, n_x)]):
            n += 1
            continue
        if not x[n] >= _threshold(x[max(0, n - pre_avg) : min(n + post_avg, n_x)], delta):
            n += 1
            continue
        peaks[n] = True
        n += wait + 1
    return peaks


def onset_backtrack(events: Any, energy: Any) -> np.ndarray:
    """librosa.onset.onset_backtrack: each event moved to the nearest local minimum of
    ``energy`` at or before it (frame 0 counts as one). Host NumPy (energy may be a GPUArray).
    No events give an empty result (librosa's match_events raises on an empty list)."""
    fn = "onset_backtrack"
    e = energy.to_numpy() if isinstance(energy, GPUArray) else np.asarray(energy)
    if e.ndim != 1:
        raise ValueError(f"{fn}: energy must be 1-D, got shape {e.shape}")
    ev = np.asarray(events)
    if ev.size and ev.dtype.kind not in "iu":
        raise TypeError(f"{fn}: events must be integer frame indices, got dtype {ev.dtype}")
    minima = np.flatnonzero((e[1:-1] <= e[:-2]) & (e[1:-1] < e[2:])) + 1
    minima = np.unique(np.concatenate(([0], minima))).astype(int)
    # librosa.util.match_events(events, minima, right=False): the last minimum <= each event.
    return minima[np.searchsorted(minima, ev, side="right") - 1]


def onset_detect(
    *,
    y: Any = None,
    sr: float = 22050,
    onset_envelope: Any = None,
    hop_length: int = 512,
    backtrack: bool = False,
    energy: Any = None,
    units: str = "frames",
    normalize: bool = True,
    sparse: bool = True,
    **kwargs: Any,
) -> np.ndarray:
    """librosa.onset.onset_detect: onset events from the peaks of an onset envelope.

    The envelope (onset_strength(y=y, sr=sr, hop_length=hop_length) on the device, or the
    given onset_envelope [..., frames]) is downloaded once; normalization (min 0, max 1 per
    row, in the envelope's dtype) and librosa's peak_pick (kwargs: pre_max, post_max,
    pre_avg, post_avg, delta, wait; defaults 30 ms, 0 ms + 1, 100 ms, 100 ms + 1, 30 ms, 0.07)
    run on the host in NumPy, as the picking is a short sequential loop. backtrack moves each
    onset to the preceding minimum of ``energy`` (default the envelope). units 'frames',
    'samples' (frames * hop_length) or 'time' (seconds). Returns a NumPy array: indices
    (sparse, 1-D envelopes only) or a boolean mask of the envelope's shape (sparse=False).
    """
    fn = "onset_detect"
    chk.choice(fn, "units", units, ("frames", "samples", "time"))
    rate = chk.number(fn, "sr", sr, positive=True)
    hop = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
    for name, flag in (("backtrack", backtrack), ("normalize", normalize), ("sparse", sparse)):
        _check_bool(fn, name, flag)
    params = _peak_params(fn, rate, hop, kwargs)
    if backtrack and not sparse:
        raise ValueError(f"{fn}: backtrack is only supported with sparse=True")
    if onset_envelope is None:
        if y is None:
            raise ValueError(f"{fn}: pass either y (a signal) or onset_envelope")
        src = chk.signal(fn, "y", y)
        env_ndim = src.ndim
    else:
        src = chk.signal(fn, "onset_envelope", onset_envelope)
        env_ndim = src.ndim
    if sparse and env_ndim != 1:
        raise ValueError(
            f"{fn}: sparse=True needs a 1-D envelope (one signal); got {env_ndim} dims; "
            "pass sparse=False for batches"
        )
    if onset_envelope is None:
        src = onset_strength(y=src, sr=rate, hop_length=hop)
    env = src.to_numpy()
    if normalize:
        env = env - np.min(env, keepdims=True, axis=-1)
        env /= np.max(env, keepdims=True, axis=-1) + np.finfo(env.dtype).tiny
    if not env.any() or not np.all(np.isfinite(env)) or env.shape[-1] == 0:
        mask = np.zeros(env.shape, dtype=bool)
    else:
        rows = env.reshape(-1, env.shape[-1])
        mask = np.stack([_peak_pick_row(r, params) for r in rows]).reshape(env.shape)
    if not sparse:
        return mask
    onsets = np.flatnonzero(mask)
    if backtrack:
        onsets = onset_backtrack(onsets, env if energy is None else energy)
    if units == "samples":
        return (onsets * hop).astype(int)
    if units == "time":
        return (onsets * hop).astype(int) / rate
    return onsets
