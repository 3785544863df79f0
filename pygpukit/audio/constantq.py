"""Constant-Q and variable-Q transforms in librosa's names: cqt, vqt, pseudo_cqt, hybrid_cqt.

librosa 0.11's recursive sub-sampling algorithm (Schoerkhuber and Klapuri, 2010), step for step:
the wavelet filters of one octave (librosa.filters.wavelet, rounded to complex64 as librosa's
default dtype does) are scaled by length / n_fft, Fourier transformed and sparsified
(librosa.util.sparsify_rows) on the host; the signal's STFT with that octave's n_fft (a 'ones'
window) is multiplied by that basis; then the signal is resampled to half the rate
(resample(orig_sr=2, target_sr=1, scale=True)) and the hop halved for the next octave down, as
long as the hop is even. When the top filter lies far enough below Nyquist the signal is first
downsampled by a power of 2 ("early downsampling").

On the device each octave is one stft and one matmul. The complex product basis @ D runs as one
real matmul: D's (re, im) pairs [batch, frames, 2 * n_freq] times a [2 * n_freq, 2 * n_filters]
matrix whose 2x2 blocks are [[re, im], [-im, re]] of the basis, which writes (re, im) pairs of
the response straight into the octave's bins of the output. The per-octave gains (the
sqrt(sr / octave sr) of librosa's rescaling and the 1 / sqrt(length) of scale=True) are folded
into the matrix. The matrices depend only on the parameters: they are built once per parameter
set (an LRU cache on the host) and uploaded once per device (pygpukit/audio/_tables.py).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray, view_as_real
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio._complex import magnitude
from pygpukit.audio._tables import device_table
from pygpukit.audio.filters import (
    check_norm,
    check_wavelet_window,
    relative_bandwidth_np,
    wavelet_lengths_np,
    wavelet_np,
)
from pygpukit.audio.resample import resample
from pygpukit.audio.spectrum import _Params, stft_frames
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype, complex64, complex128, float32, float64

__all__ = ["cqt", "hybrid_cqt", "pseudo_cqt", "vqt"]

# librosa.note_to_hz('C1'), cqt's default fmin.
_C1 = 440.0 * 2.0 ** ((24 - 69.0) / 12.0)


def sparsify_rows_np(x: np.ndarray, quantile: float) -> np.ndarray:
    """librosa.util.sparsify_rows as a dense array: per row, zero the smallest-magnitude entries
    whose magnitudes sum to less than ``quantile`` of the row's total (ties with the threshold
    magnitude are kept)."""
    mags = np.abs(x)
    norms = np.sum(mags, axis=1, keepdims=True)
    mag_sort = np.sort(mags, axis=1)
    cumulative_mag = np.cumsum(mag_sort / norms, axis=1)
    threshold_idx = np.argmin(cumulative_mag < quantile, axis=1)
    threshold = mag_sort[np.arange(x.shape[0]), threshold_idx][:, None]
    return np.where(mags >= threshold, x, 0)


def _fft_basis(
    sr: float,
    freqs: tuple[float, ...],
    alpha: tuple[float, ...],
    filter_scale: float,
    norm: Any,
    sparsity: float,
    window: Any,
    gamma: float | None,
    hop_length: int | None,
) -> tuple[np.ndarray, int]:
    """librosa's __vqt_filter_fft: (the sparsified [n_filters, 1 + n_fft // 2] FFT of the
    wavelet basis, n_fft). The basis and its FFT are rounded to complex64 where librosa's are,
    and sparsified by magnitudes of that precision, so the sparsity pattern is librosa's."""
    filt, lengths = wavelet_np(
        "cqt", np.asarray(freqs), sr, window, filter_scale, norm, gamma, np.asarray(alpha), True
    )
    basis = filt.astype(np.complex64)
    n_fft = basis.shape[1]
    if hop_length is not None and n_fft < 2.0 ** (1 + np.ceil(np.log2(hop_length))):
        n_fft = int(2.0 ** (1 + np.ceil(np.log2(hop_length))))
    # librosa's in-place scaling: complex64 times float64, rounded back to complex64.
    basis *= lengths[:, np.newaxis] / float(n_fft)
    return sparsify_rows_np(_fft_complex64(basis, n_fft)[:, : n_fft // 2 + 1], sparsity), n_fft


def _fft_complex64(basis: np.ndarray, n_fft: int) -> np.ndarray:
    """The complex64 FFT of the complex64 basis rows as librosa computes it: scipy.fft in single
    precision. Sparsification keeps entries down to a magnitude threshold, so an entry within
    an ulp of it can flip with any other rounding (about 1 basis in 200 over the parameter
    grid tried): scipy.fft is used where it is installed (always, alongside librosa). Without
    it the FFT runs in double and is rounded once to complex64."""
    try:
        import scipy.fft as sfft
    except ImportError:
        return np.fft.fft(basis.astype(np.complex128), n=n_fft, axis=1).astype(np.complex64)
    return np.asarray(sfft.fft(basis, n=n_fft, axis=1), dtype=np.complex64)


@functools.lru_cache(maxsize=32)
def _complex_matrix(key: tuple[Any, ...], gains: tuple[float, ...]) -> tuple[np.ndarray, int]:
    """(the float64 [2 * n_freq, 2 * n_filters] real matrix of one octave, n_fft): pairs
    (re, im) of D times it give pairs of (basis * gains) @ D."""
    basis, n_fft = _fft_basis(*key)
    b = basis.astype(np.complex128) * np.asarray(gains)[:, None]
    n_filt, n_freq = b.shape
    m = np.empty((n_freq, 2, n_filt, 2))
    m[:, 0, :, 0] = b.real.T
    m[:, 1, :, 0] = -b.imag.T
    m[:, 0, :, 1] = b.imag.T
    m[:, 1, :, 1] = b.real.T
    return m.reshape(2 * n_freq, 2 * n_filt), n_fft


@functools.lru_cache(maxsize=32)
def _magnitude_matrix(key: tuple[Any, ...], gains: tuple[float, ...]) -> tuple[np.ndarray, int]:
    """(the float64 [n_freq, n_filters] matrix |basis|.T * gains, n_fft) of pseudo_cqt."""
    basis, n_fft = _fft_basis(*key)
    return (np.abs(basis.astype(np.complex128)) * np.asarray(gains)[:, None]).T.copy(), n_fft


class _Common(NamedTuple):
    x: GPUArray
    real: DataType  # the float type the transform runs in (dtype's real part)
    sr: float
    hop: int
    fmin: float
    n_bins: int
    bpo: int
    filter_scale: float
    norm: Any
    sparsity: float
    window: Any
    scale: bool
    pad_mode: str


def _check_common(
    fn: str,
    y: Any,
    sr: Any,
    hop_length: Any,
    fmin: Any,
    n_bins: Any,
    bins_per_octave: Any,
    tuning: Any,
    filter_scale: Any,
    norm: Any,
    sparsity: Any,
    window: Any,
    scale: Any,
    pad_mode: Any,
    res_type: Any,
    dtype: Any,
) -> _Common:
    """The checks every transform shares, in argument order, before any op runs."""
    x = chk.signal(fn, "y", y)
    if x.shape[-1] == 0:
        raise ValueError(f"{fn}: y has no samples (shape {x.shape})")
    rate = chk.number(fn, "sr", sr, positive=True)
    hop = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
    f0 = _C1 if fmin is None else chk.number(fn, "fmin", fmin, positive=True)
    nb = int(chk.positive_int(fn, "n_bins", n_bins) or 0)
    bpo = int(chk.positive_int(fn, "bins_per_octave", bins_per_octave) or 0)
    if tuning is None:
        raise ValueError(
            f"{fn}: tuning=None (estimating the tuning from the signal) is not served; pass the "
            "tuning offset in fractions of a bin (0.0 for A440)"
        )
    tun = chk.number(fn, "tuning", tuning)
    fs = chk.number(fn, "filter_scale", filter_scale, positive=True)
    nm = check_norm(fn, norm)
    sp = chk.number(fn, "sparsity", sparsity)
    if not 0.0 <= sp < 1.0:
        raise ValueError(f"{fn}: sparsity must be in [0, 1), got {sparsity!r}")
    check_wavelet_window(fn, window)
    if not isinstance(scale, (bool, np.bool_)):
        raise TypeError(f"{fn}: scale must be a bool, got {type(scale).__name__}")
    chk.choice(fn, "pad_mode", pad_mode, _frames.PAD_MODES)
    if not isinstance(res_type, str) or res_type != "polyphase":
        raise ValueError(
            f"{fn}: res_type must be 'polyphase' (scipy.signal.resample_poly's filter, the only "
            f"resampler served; librosa's default 'soxr_hq' is not), got {res_type!r}"
        )
    if dtype is None:
        real = x.dtype
    else:
        try:
            name = as_dtype(dtype).name
        except (TypeError, ValueError):
            raise TypeError(f"{fn}: dtype {dtype!r} is not a data type") from None
        if name not in ("complex64", "complex128"):
            raise TypeError(f"{fn}: dtype must be complex64, complex128 or None, got {dtype!r}")
        real = float32 if name == "complex64" else float64
    f_tuned = f0 * 2.0 ** (tun / bpo)
    return _Common(x, real, rate, hop, f_tuned, nb, bpo, fs, nm, sp, window, bool(scale), pad_mode)


def _interval_ratios(fn: str, intervals: Any) -> np.ndarray | None:
    """None for 'equal' temperament, else the checked array of ratios (which sets the bins per
    octave, as in librosa)."""
    if isinstance(intervals, str):
        if intervals != "equal":
            raise ValueError(
                f"{fn}: intervals must be 'equal' or an array of frequency ratios within one "
                f"octave (the just-intonation names are not served), got {intervals!r}"
            )
        return None
    try:
        ratios = np.array(intervals, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: intervals must be 'equal' or an array of numbers") from None
    if ratios.ndim != 1 or ratios.size == 0:
        raise ValueError(f"{fn}: intervals must be a non-empty 1-D array of ratios")
    if not np.all(np.isfinite(ratios)) or np.any(ratios <= 0):
        raise ValueError(f"{fn}: intervals must be finite positive ratios")
    return ratios


def _frequencies(fn: str, c: _Common, ratios: np.ndarray | None) -> np.ndarray:
    """librosa.interval_frequencies(n_bins, fmin, intervals, bins_per_octave, sort=True)."""
    if ratios is None:
        ratios = 2.0 ** (np.arange(0, c.bpo, dtype=float) / c.bpo)
    n_octaves = np.ceil(c.n_bins / ratios.size)
    all_ratios = np.multiply.outer(2.0 ** np.arange(n_octaves), ratios).flatten()[: c.n_bins]
    freqs = np.sort(all_ratios) * c.fmin
    if freqs.size > 1 and np.any(freqs[:-1] >= freqs[1:]):
        raise ValueError(f"{fn}: intervals give repeated frequencies; the ratios must be distinct")
    return freqs


def _alpha(freqs: np.ndarray, bpo: int) -> np.ndarray:
    """librosa's relative bandwidths; a single bin gets the equal-temperament value."""
    if freqs.size == 1:
        r = 2 ** (1 / bpo)
        return np.atleast_1d((r**2 - 1) / (r**2 + 1))
    return relative_bandwidth_np(freqs)


def _check_nyquist(fn: str, c: _Common, cutoff: float, freqs: np.ndarray) -> None:
    if cutoff > c.sr / 2.0:
        raise ValueError(
            f"{fn}: n_bins={c.n_bins} from fmin={c.fmin:g} Hz reach {freqs[-1]:g} Hz, whose "
            f"filter extends to {cutoff:g} Hz, above the Nyquist frequency sr / 2 = "
            f"{c.sr / 2.0:g} Hz; reduce n_bins (or fmin)"
        )


def _two_factors(x: int) -> int:
    n = 0
    while x > 0 and x % 2 == 0:
        n, x = n + 1, x // 2
    return n


def _frames_of(n: int, n_fft: int, hop: int) -> int:
    """Frames of a centred STFT of n samples."""
    return 1 + (n + 2 * (n_fft // 2) - n_fft) // hop


class _Octave(NamedTuple):
    lo: int  # first bin of the output the octave fills
    hi: int
    n_fft: int
    hop: int
    matrix: np.ndarray
    downsample: bool  # resample by 2 after this octave


class _Plan(NamedTuple):
    early: int  # early downsampling factor (1: none)
    octaves: list[_Octave]
    n_frames: int


def _plan_vqt(fn: str, c: _Common, ratios: np.ndarray | None, gamma: float | None) -> _Plan:
    """Everything librosa's vqt derives from the parameters and the signal length."""
    freqs = _frequencies(fn, c, ratios)
    n_octaves = int(np.ceil(float(c.n_bins) / c.bpo))
    n_filters = min(c.bpo, c.n_bins)
    alpha = _alpha(freqs, c.bpo)
    _, cutoff = wavelet_lengths_np(fn, freqs, c.sr, c.window, c.filter_scale, gamma, alpha)
    _check_nyquist(fn, c, cutoff, freqs)

    # librosa's __early_downsample_count.
    nyquist = c.sr / 2.0
    count = min(
        max(0, int(np.ceil(np.log2(nyquist / cutoff)) - 1) - 1),
        max(0, _two_factors(c.hop) - n_octaves + 1),
    )
    n, sr, hop, early = c.x.shape[-1], c.sr, c.hop, 2**count
    if early > 1:
        if n < early:
            raise ValueError(
                f"{fn}: y has {n} samples, too few for a {n_octaves}-octave transform (it is "
                f"downsampled by {early} first)"
            )
        hop //= early
        sr = sr / float(early)
        n = int(np.ceil(n / early))
    # scale=True divides by sqrt(length) at the downsampled rate (librosa recomputes them).
    lengths, _ = wavelet_lengths_np(fn, freqs, sr, c.window, c.filter_scale, gamma, alpha)

    octaves, n_frames, my_sr, my_hop = [], None, sr, hop
    for i in range(n_octaves):
        hi = c.n_bins - n_filters * i
        lo = max(0, hi - n_filters)
        gains = np.full(hi - lo, np.sqrt(sr / my_sr))
        if c.scale:
            gains = gains / np.sqrt(lengths[lo:hi])
        key = (
            my_sr,
            tuple(freqs[lo:hi].tolist()),
            tuple(alpha[lo:hi].tolist()),
            c.filter_scale,
            c.norm,
            c.sparsity,
            c.window,
            gamma,
            None,
        )
        matrix, n_fft = _complex_matrix(key, tuple(gains.tolist()))
        _frames.check_pad(
            f"{fn} (octave {i}: {n} samples, n_fft {n_fft})", n, n_fft // 2, c.pad_mode
        )
        frames = _frames_of(n, n_fft, my_hop)
        n_frames = frames if n_frames is None else min(n_frames, frames)
        down = my_hop % 2 == 0 and i < n_octaves - 1
        octaves.append(_Octave(lo, hi, n_fft, my_hop, matrix, down))
        # An odd hop stops the halving: the octaves below run at this rate (as in librosa).
        if down:
            my_hop //= 2
            my_sr /= 2.0
            n = int(np.ceil(n * 0.5))
    assert n_frames is not None
    return _Plan(early, octaves, n_frames)


def _run_vqt(fn: str, c: _Common, plan: _Plan) -> GPUArray:
    """The frame-major complex response [batch, frames, n_bins] of c.x as rows."""
    rows = _rows(c)
    batch, dev = rows.shape[0], rows.device
    real = rows.dtype.np_dtype
    if plan.early > 1:
        rows = resample(rows, orig_sr=plan.early, target_sr=1, scale=True)
        if not c.scale:
            rows = rows * math.sqrt(plan.early)
    t = plan.n_frames
    out = empty((batch, t, c.n_bins), complex64 if real == np.float32 else complex128, dev)
    out_ri = view_as_real(out).reshape(batch, t, 2 * c.n_bins)
    for oc in plan.octaves:
        z, _ = stft_frames(rows, _Params(fn, oc.n_fft, oc.hop, None, "ones"), True, c.pad_mode)
        z_ri = view_as_real(z).reshape(batch, z.shape[1], 2 * z.shape[2])[:, :t]
        ops.matmul(
            z_ri, device_table(oc.matrix, real, dev), out=out_ri[:, :, 2 * oc.lo : 2 * oc.hi]
        )
        if oc.downsample:
            rows = resample(rows, orig_sr=2, target_sr=1, scale=True)
    return out


def _rows(c: _Common) -> GPUArray:
    """c.x as contiguous [batch, samples] rows of the compute type."""
    rows, _ = _frames.as_rows(c.x)
    return rows if rows.dtype is c.real else rows.astype(c.real)


def _as_output(c: _Common, frame_major: GPUArray) -> GPUArray:
    """[batch, frames, bins] as [..., bins, frames] (a view, as stft returns)."""
    lead = c.x.shape[:-1]
    return frame_major.reshape(*lead, *frame_major.shape[1:]).swapaxes(-1, -2)


def vqt(
    y: Any,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    fmin: float | None = None,
    n_bins: int = 84,
    intervals: Any = "equal",
    gamma: float | None = None,
    bins_per_octave: int = 12,
    tuning: float | None = 0.0,
    filter_scale: float = 1,
    norm: Any = 1,
    sparsity: float = 0.01,
    window: Any = "hann",
    scale: bool = True,
    pad_mode: str = "constant",
    res_type: str = "polyphase",
    dtype: Any = None,
) -> GPUArray:
    """librosa.vqt: the complex variable-Q transform [..., n_bins, frames] of y [..., samples].

    Bin k's filter is a windowed complex sinusoid at freqs[k] (fmin, default C1 = 32.70 Hz,
    times 2**(tuning / bins_per_octave), times the interval ratios: 'equal' temperament or an
    array of ratios, which sets bins_per_octave) of bandwidth alpha * freqs[k] + gamma (gamma
    None: proportional to the ERB, gamma 0: cqt). Frames are hop_length apart (centred, the
    signal padded per pad_mode). scale=True divides each bin by sqrt(filter length), as
    librosa. float32 input gives complex64, float64 complex128 (dtype may ask for the other).
    hop_length needs no factor 2**(n_octaves - 1): as in librosa 0.11, the halving of rate and
    hop stops at an odd hop, and the octaves below run at that rate with longer filters.

    Deviations: res_type defaults to and only serves 'polyphase' (scipy.signal.resample_poly's
    filter: pygpukit.audio.resample); librosa's default 'soxr_hq' gives slightly different
    values in the octaves below the top. tuning=None (estimate the tuning) is not served;
    intervals serves 'equal' and ratio arrays, not the just-intonation names. pad_mode
    'reflect'/'symmetric' need each octave's (downsampled) signal longer than half its n_fft
    (stft's limit; ValueError otherwise). The result is a view with the frame axis last over
    frame-major storage (.contiguous() makes a copy).
    """
    fn = "vqt"
    ratios = _interval_ratios(fn, intervals)
    bpo = bins_per_octave if ratios is None else ratios.size
    c = _check_common(
        fn, y, sr, hop_length, fmin, n_bins, bpo, tuning, filter_scale, norm,
        sparsity, window, scale, pad_mode, res_type, dtype,
    )  # fmt: skip
    g = chk.number(fn, "gamma", gamma, allow_none=True)
    if g is not None and g < 0:
        raise ValueError(f"{fn}: gamma must be None or >= 0, got {gamma!r}")
    plan = _plan_vqt(fn, c, ratios, g)
    return _as_output(c, _run_vqt(fn, c, plan))


def cqt(
    y: Any,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    fmin: float | None = None,
    n_bins: int = 84,
    bins_per_octave: int = 12,
    tuning: float | None = 0.0,
    filter_scale: float = 1,
    norm: Any = 1,
    sparsity: float = 0.01,
    window: Any = "hann",
    scale: bool = True,
    pad_mode: str = "constant",
    res_type: str = "polyphase",
    dtype: Any = None,
) -> GPUArray:
    """librosa.cqt: the complex constant-Q transform [..., n_bins, frames] of y [..., samples],
    vqt with gamma=0 and equal temperament (default: 84 bins of 12 per octave from C1, hop 512).

    Deviations: as vqt's (res_type 'polyphase' only; tuning=None is not served).
    """
    return vqt(
        y, sr=sr, hop_length=hop_length, fmin=fmin, n_bins=n_bins, intervals="equal", gamma=0,
        bins_per_octave=bins_per_octave, tuning=tuning, filter_scale=filter_scale, norm=norm,
        sparsity=sparsity, window=window, scale=scale, pad_mode=pad_mode, res_type=res_type,
        dtype=dtype,
    )  # fmt: skip


def _cqt_frequencies(c: _Common) -> np.ndarray:
    """librosa.cqt_frequencies(n_bins, fmin, bins_per_octave) (fmin already tuned)."""
    return 1.0 * c.fmin * 2.0 ** (np.arange(0, c.n_bins, dtype=float) / c.bpo)


def _pseudo_plan(
    fn: str, c: _Common, freqs: np.ndarray, alpha: np.ndarray
) -> tuple[np.ndarray, int]:
    """(pseudo_cqt's [n_freq, n_bins] magnitude matrix with its scaling folded in, n_fft)."""
    lengths, _ = wavelet_lengths_np(fn, freqs, c.sr, c.window, c.filter_scale, 0.0, alpha)
    # __vqt_filter_fft's n_fft: the longest filter's power of 2, at least two hops' worth.
    n_fft = max(
        int(2.0 ** np.ceil(np.log2(np.max(lengths)))),
        int(2.0 ** (1 + np.ceil(np.log2(c.hop)))),
    )
    _frames.check_pad(fn, c.x.shape[-1], n_fft // 2, c.pad_mode)
    gains = np.full(freqs.size, 1 / np.sqrt(n_fft)) if c.scale else np.sqrt(lengths / n_fft)
    key = (c.sr, tuple(freqs.tolist()), tuple(alpha.tolist()), c.filter_scale, c.norm,
           c.sparsity, c.window, 0.0, c.hop)  # fmt: skip
    matrix, n_fft_basis = _magnitude_matrix(key, tuple(gains.tolist()))
    assert n_fft_basis == n_fft
    return matrix, n_fft


def _run_pseudo(fn: str, c: _Common, matrix: np.ndarray, n_fft: int) -> GPUArray:
    """pseudo_cqt's frame-major magnitudes [batch, frames, n_bins] of c.x as rows."""
    rows = _rows(c)
    z, _ = stft_frames(rows, _Params(fn, n_fft, c.hop, None, "hann"), True, c.pad_mode)
    return ops.matmul(magnitude(z), device_table(matrix, rows.dtype.np_dtype, rows.device))


def pseudo_cqt(
    y: Any,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    fmin: float | None = None,
    n_bins: int = 84,
    bins_per_octave: int = 12,
    tuning: float | None = 0.0,
    filter_scale: float = 1,
    norm: Any = 1,
    sparsity: float = 0.01,
    window: Any = "hann",
    scale: bool = True,
    pad_mode: str = "constant",
    dtype: Any = None,
) -> GPUArray:
    """librosa.pseudo_cqt: magnitudes [..., n_bins, frames] from one STFT (Hann window, n_fft
    the longest filter's power of 2, at least 2 ** (1 + ceil(log2(hop_length)))) times the
    magnitude of the FFT filter basis, without downsampling. float32 input gives float32.

    Deviations: tuning=None is not served; a top filter above Nyquist raises ValueError
    (librosa computes an aliased response).
    """
    fn = "pseudo_cqt"
    c = _check_common(
        fn, y, sr, hop_length, fmin, n_bins, bins_per_octave, tuning, filter_scale, norm,
        sparsity, window, scale, pad_mode, "polyphase", dtype,  # no resampling here
    )  # fmt: skip
    freqs = _cqt_frequencies(c)
    alpha = _alpha(freqs, c.bpo)
    _, cutoff = wavelet_lengths_np(fn, freqs, c.sr, c.window, c.filter_scale, 0.0, alpha)
    _check_nyquist(fn, c, cutoff, freqs)
    return _as_output(c, _run_pseudo(fn, c, *_pseudo_plan(fn, c, freqs, alpha)))


def hybrid_cqt(
    y: Any,
    *,
    sr: float = 22050,
    hop_length: int = 512,
    fmin: float | None = None,
    n_bins: int = 84,
    bins_per_octave: int = 12,
    tuning: float | None = 0.0,
    filter_scale: float = 1,
    norm: Any = 1,
    sparsity: float = 0.01,
    window: Any = "hann",
    scale: bool = True,
    pad_mode: str = "constant",
    res_type: str = "polyphase",
    dtype: Any = None,
) -> GPUArray:
    """librosa.hybrid_cqt: magnitudes [..., n_bins, frames]; the bins whose filters (rounded up
    to a power of 2) are shorter than 2 * hop_length come from pseudo_cqt, the others from
    |cqt|. float32 input gives float32.

    Deviations: as cqt's; a top filter above Nyquist raises ValueError (librosa checks the
    full-cqt bins only).
    """
    fn = "hybrid_cqt"
    c = _check_common(
        fn, y, sr, hop_length, fmin, n_bins, bins_per_octave, tuning, filter_scale, norm,
        sparsity, window, scale, pad_mode, res_type, dtype,
    )  # fmt: skip
    freqs = _cqt_frequencies(c)
    alpha = _alpha(freqs, c.bpo)
    lengths, cutoff = wavelet_lengths_np(fn, freqs, c.sr, c.window, c.filter_scale, 0.0, alpha)
    _check_nyquist(fn, c, cutoff, freqs)
    pseudo = 2.0 ** np.ceil(np.log2(lengths)) < 2 * c.hop
    n_pseudo = int(np.sum(pseudo))
    n_full = c.n_bins - n_pseudo
    # Each part is librosa's call with tuning 0 from the tuned fmin.
    parts: list[tuple[_Common, Any]] = []
    if n_pseudo > 0:
        cp = c._replace(fmin=float(np.min(freqs[pseudo])), n_bins=n_pseudo)
        fp = _cqt_frequencies(cp)
        parts.append((cp, _pseudo_plan(fn, cp, fp, _alpha(fp, cp.bpo))))
    if n_full > 0:
        cf = c._replace(n_bins=n_full)
        parts.append((cf, _plan_vqt(fn, cf, None, 0.0)))

    responses = []
    for cpart, how in parts:
        if isinstance(how, _Plan):
            responses.append(magnitude(_run_vqt(fn, cpart, how)))
        else:
            responses.append(_run_pseudo(fn, cpart, *how))
    # librosa's __trim_stack: the pseudo bins on top, the full ones below, the shortest frames.
    t = min(r.shape[1] for r in responses)
    rows = responses[0].shape[0]
    out = empty((rows, t, c.n_bins), responses[0].dtype, responses[0].device)
    end = c.n_bins
    for r in responses:
        n_oct = r.shape[2]
        out[:, :, end - n_oct : end] = r[:, :t]
        end -= n_oct
    return _as_output(c, out)
