"""Filter design in librosa's names (librosa.filters): mel filter banks, window functions,
the window sum-square envelope, the DCT matrix behind mfcc, and the wavelet (constant-Q and
variable-Q) filter banks behind cqt/vqt.

These depend only on their parameters, never on the signal, so they are computed on the host in
float64 with NumPy (the formulas of librosa and scipy.signal, cited per function) and uploaded
once; the per-signal work runs on the device with routed ops.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio.convert import mel_frequencies_np
from pygpukit.creation import from_numpy
from pygpukit.dtypes import as_dtype

__all__ = [
    "dct",
    "get_window",
    "mel",
    "mel_filters",
    "wavelet",
    "wavelet_lengths",
    "window_sumsquare",
]

# scipy.signal.get_window's names and aliases for the windows served here.
_WINDOW_ALIASES = {
    "hann": "hann",
    "han": "hann",
    "hamming": "hamming",
    "hamm": "hamming",
    "ham": "hamming",
    "blackman": "blackman",
    "black": "blackman",
    "blk": "blackman",
    "boxcar": "boxcar",
    "box": "boxcar",
    "ones": "boxcar",
    "rect": "boxcar",
    "rectangular": "boxcar",
    "bartlett": "bartlett",
    "bart": "bartlett",
    "brt": "bartlett",
    "triang": "triang",
    "triangle": "triang",
    "tri": "triang",
}
# scipy.signal.windows.general_cosine coefficients.
_COSINE = {"hann": (0.5, 0.5), "hamming": (0.54, 0.46), "blackman": (0.42, 0.50, 0.08)}
WINDOW_NAMES = (*sorted(set(_WINDOW_ALIASES.values())), "('kaiser', beta)")


def _symmetric(name: str, m: int, params: tuple[float, ...]) -> np.ndarray:
    """scipy.signal.windows.<name>(m, sym=True) (m >= 2)."""
    if name in _COSINE:
        fac = np.linspace(-np.pi, np.pi, m)
        w = np.zeros(m)
        for k, a in enumerate(_COSINE[name]):
            w += a * np.cos(k * fac)
        return w
    if name == "boxcar":
        return np.ones(m)
    if name == "bartlett":
        n = np.arange(0, m)
        return np.where(n <= (m - 1) / 2.0, 2.0 * n / (m - 1), 2.0 - 2.0 * n / (m - 1))
    if name == "triang":
        n = np.arange(1, (m + 1) // 2 + 1)
        if m % 2 == 0:
            w = (2 * n - 1.0) / m
            return np.r_[w, w[::-1]]
        w = 2 * n / (m + 1.0)
        return np.r_[w, w[-2::-1]]
    # kaiser: I0(beta * sqrt(1 - ((n - alpha) / alpha)**2)) / I0(beta), alpha = (m - 1) / 2.
    return np.kaiser(m, params[0])


def window_np(fn: str, window: Any, n: int, fftbins: bool = True) -> np.ndarray:
    """The float64 host values of ``window`` at length n (librosa.filters.get_window's rules):
    a name (or (name, *params) tuple) as scipy.signal.get_window, a callable called with n, or
    an array of length n used as is."""
    if callable(window):
        w = np.asarray(window(n), dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"{fn}: window({n}) returned shape {w.shape}, expected ({n},)")
        return w
    if isinstance(window, (str, tuple)):
        name, params = (window, ()) if isinstance(window, str) else (window[0], window[1:])
        key = _WINDOW_ALIASES.get(name) if isinstance(name, str) else None
        if key is None and name == "kaiser":
            key = "kaiser"
        if key is None or (key == "kaiser") != (len(params) == 1) or len(params) > 1:
            raise ValueError(
                f"{fn}: window {window!r} is not a known window; use one of {WINDOW_NAMES}, "
                "a callable of the length, or an array"
            )
        if key == "kaiser":
            params = (chk.number(fn, "window's beta", params[0]),)
        if n <= 1:
            return np.ones(n)
        m = n + 1 if fftbins else n  # periodic: one more point, the last dropped (scipy)
        return _symmetric(key, m, params)[:n]
    if isinstance(window, GPUArray):
        window = window.to_numpy()
    if isinstance(window, (np.ndarray, list)):
        w = np.asarray(window, dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"{fn}: window array has shape {w.shape}; it must be ({n},)")
        return w
    raise TypeError(
        f"{fn}: window must be a name, a (name, param) tuple, a callable or an array, "
        f"got {type(window).__name__}"
    )


def get_window(window: Any, Nx: int, *, fftbins: bool = True, device: Any = None) -> GPUArray:
    """librosa.filters.get_window as a float64 GPUArray: scipy.signal.get_window's values for
    'hann', 'hamming', 'blackman', 'boxcar', 'bartlett', 'triang' (and their aliases) and
    ('kaiser', beta); periodic (fftbins=True, the DFT-even form) or symmetric."""
    fn = "get_window"
    n = int(chk.positive_int(fn, "Nx", Nx) or 0)
    return from_numpy(window_np(fn, window, n, bool(fftbins)), device=device)


def pad_center_np(fn: str, data: np.ndarray, size: int) -> np.ndarray:
    """librosa.util.pad_center: zero-pad a 1-D window symmetrically to ``size``."""
    n = data.shape[-1]
    lpad = (size - n) // 2
    if lpad < 0:
        raise ValueError(f"{fn}: win_length={n} must be <= n_fft={size}")
    return np.pad(data, (lpad, size - n - lpad))


def _normalize_rows(fn: str, S: np.ndarray, norm: Any, tiny: float) -> np.ndarray:
    """librosa.util.normalize(S, norm=norm, axis=-1) with its default fill: rows whose norm is
    below tiny are left as they are."""
    mag = np.abs(S)
    if norm == np.inf:
        length = mag.max(axis=-1, keepdims=True)
    elif norm == -np.inf:
        length = mag.min(axis=-1, keepdims=True)
    elif norm == 0:
        length = np.sum(mag > 0, axis=-1, keepdims=True, dtype=mag.dtype)
    elif norm > 0:
        length = np.sum(mag**norm, axis=-1, keepdims=True) ** (1.0 / norm)
    else:
        raise ValueError(f"{fn}: norm must be 'slaney', None or a number >= 0, got {norm!r}")
    length[length < tiny] = 1.0
    return S / length


def mel_np(
    fn: str,
    sr: float,
    n_fft: int,
    n_mels: int,
    fmin: float,
    fmax: float | None,
    htk: bool,
    norm: Any,
    tiny: float,
) -> np.ndarray:
    """The float64 [n_mels, 1 + n_fft // 2] mel filter bank (librosa.filters.mel's formula)."""
    if fmax is None:
        fmax = float(sr) / 2
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = mel_frequencies_np(n_mels + 2, fmin, fmax, htk)
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    # Triangles: rising from mel_f[i] to mel_f[i + 1], falling to mel_f[i + 2].
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    if isinstance(norm, str):
        if norm != "slaney":
            raise ValueError(f"{fn}: norm must be 'slaney', None or a number, got {norm!r}")
        # Slaney-style: each triangle has unit area in Hz (constant energy per channel).
        weights *= (2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels]))[:, None]
    elif norm is not None:
        weights = _normalize_rows(fn, weights, norm, tiny)
    if not np.all((mel_f[:-2] == 0) | (weights.max(axis=1) > 0)):
        warnings.warn(
            "Empty filters detected in mel frequency basis. Some channels will produce empty "
            "responses. Try increasing your sampling rate (and fmax) or reducing n_mels.",
            stacklevel=3,
        )
    return weights


def mel(
    *,
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
    dtype: Any = np.float32,
    device: Any = None,
) -> GPUArray:
    """librosa.filters.mel: the [n_mels, 1 + n_fft // 2] mel filter bank as a GPUArray.

    htk=False is Slaney's mel scale, htk=True the HTK formula; norm='slaney' scales each
    triangle to unit area in Hz, None leaves peaks at 1, a number p divides each row by its
    p-norm (np.inf: the max). Built in float64 and rounded once to ``dtype`` (librosa rounds the
    triangles to float32 before the Slaney scaling: the results differ by at most 1 ulp).
    """
    fn = "mel"
    rate = chk.number(fn, "sr", sr, positive=True)
    nfft = int(chk.positive_int(fn, "n_fft", n_fft) or 0)
    nm = int(chk.positive_int(fn, "n_mels", n_mels) or 0)
    lo = chk.number(fn, "fmin", fmin)
    hi = chk.number(fn, "fmax", fmax, allow_none=True)
    if not isinstance(norm, (str, type(None), int, float)) or isinstance(norm, bool):
        raise ValueError(f"{fn}: norm must be 'slaney', None or a number, got {norm!r}")
    dt = as_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{fn}: dtype must be a float type, got {dt.name}")
    tiny = float(np.finfo(dt.np_dtype).tiny)
    w = mel_np(fn, rate, nfft, nm, lo, hi, bool(htk), norm, tiny)
    return from_numpy(w.astype(dt.np_dtype), device=device)


mel_filters = mel


def window_sumsquare_np(
    fn: str, window: Any, n_frames: int, hop_length: int, win_length: int, n_fft: int
) -> np.ndarray:
    """librosa.filters.window_sumsquare in float64: sum over frames of window**2 shifted by
    hop_length, length n_fft + hop_length * (n_frames - 1)."""
    win = pad_center_np(fn, window_np(fn, window, win_length), n_fft)
    return sumsquare_np(win, n_frames, hop_length)


def sumsquare_np(win: np.ndarray, n_frames: int, hop_length: int) -> np.ndarray:
    """Overlap-add of n_frames copies of win**2, hop_length apart (float64)."""
    n_fft = win.shape[0]
    n = n_fft + hop_length * (n_frames - 1)
    # ceil(n_fft / hop) vectorised steps instead of one step per frame: piece j of every frame
    # lands on block j + frame of a [frames + r - 1, hop] grid.
    r = -(-n_fft // hop_length)
    pieces = np.pad(win**2, (0, r * hop_length - n_fft)).reshape(r, hop_length)
    grid = np.zeros((n_frames + r - 1, hop_length))
    for j in range(r):
        grid[j : j + n_frames] += pieces[j]
    return grid.reshape(-1)[:n]


def window_sumsquare(
    *,
    window: Any,
    n_frames: int,
    hop_length: int = 512,
    win_length: int | None = None,
    n_fft: int = 2048,
    dtype: Any = np.float32,
    device: Any = None,
) -> GPUArray:
    """librosa.filters.window_sumsquare (norm=None) as a GPUArray of ``dtype``."""
    fn = "window_sumsquare"
    nf = int(chk.positive_int(fn, "n_frames", n_frames) or 0)
    hop = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
    nfft = int(chk.positive_int(fn, "n_fft", n_fft) or 0)
    wl = int(chk.positive_int(fn, "win_length", win_length, allow_none=True) or nfft)
    w = window_sumsquare_np(fn, window, nf, hop, wl, nfft)
    return from_numpy(w.astype(as_dtype(dtype).np_dtype), device=device)


def dct_np(fn: str, n_out: int, n: int, dct_type: int, norm: Any) -> np.ndarray:
    """The first n_out rows of the float64 [n, n] matrix D with scipy.fft.dct(x, type=dct_type,
    norm=norm) == D @ x, for types 2 and 3 and norm 'ortho' or None."""
    if dct_type not in (2, 3) or isinstance(dct_type, bool):
        raise ValueError(f"{fn}: dct_type must be 2 or 3, got {dct_type!r}")
    if norm not in ("ortho", None):
        raise ValueError(f"{fn}: norm must be 'ortho' or None, got {norm!r}")
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    basis = np.cos(np.pi * k * (2 * i + 1) / (2 * n))  # basis[k, i]: DCT-II row k, sample i
    if norm == "ortho":
        scale = np.full((n, 1), math.sqrt(2.0 / n))
        scale[0] = math.sqrt(1.0 / n)
        d2 = basis * scale
        d = d2 if dct_type == 2 else d2.T  # the orthonormal DCT-III inverts the DCT-II
    elif dct_type == 2:
        d = 2.0 * basis
    else:
        d = basis.T * np.where(np.arange(n) == 0, 1.0, 2.0)[None, :]
    return d[:n_out]


def dct(
    n_filters: int,
    n_input: int,
    *,
    dct_type: int = 2,
    norm: Any = "ortho",
    dtype: Any = np.float32,
    device: Any = None,
) -> GPUArray:
    """The [n_filters, n_input] DCT matrix (scipy.fft.dct along the input axis, types 2 and 3),
    as mfcc applies it with one matmul."""
    fn = "dct"
    nf = int(chk.positive_int(fn, "n_filters", n_filters) or 0)
    ni = int(chk.positive_int(fn, "n_input", n_input) or 0)
    if nf > ni:
        raise ValueError(f"{fn}: n_filters={nf} must be <= n_input={ni}")
    return from_numpy(dct_np(fn, nf, ni, dct_type, norm).astype(as_dtype(dtype).np_dtype), device)


WindowSpec = str | tuple[Any, ...] | Callable[[int], Any] | np.ndarray | GPUArray


# librosa.filters.WINDOW_BANDWIDTHS for the window names served here: librosa's tabulated
# equivalent noise bandwidths (they differ in the 4th digit from a 1000-point estimate, and the
# cutoff they give decides cqt's Nyquist check and its early downsampling).
_WINDOW_BANDWIDTHS = {
    **dict.fromkeys(("bart", "bartlett", "brt"), 1.3334961334912805),
    **dict.fromkeys(("black", "blackman", "blk"), 1.7269681554262326),
    **dict.fromkeys(("box", "boxcar", "ones", "rect", "rectangular"), 1.0),
    **dict.fromkeys(("ham", "hamm", "hamming"), 1.3629455320350348),
    **dict.fromkeys(("han", "hann"), 1.50018310546875),
    **dict.fromkeys(("tri", "triang", "triangle"), 1.3331706523555851),
}


def check_wavelet_window(fn: str, window: Any) -> None:
    """A wavelet window is a name, a (name, param) tuple or a callable: every filter has its own
    length, so a fixed-length array cannot serve (librosa fails on one too)."""
    if isinstance(window, (np.ndarray, list, GPUArray)) or not (
        isinstance(window, (str, tuple)) or callable(window)
    ):
        raise TypeError(
            f"{fn}: window must be a name, a (name, param) tuple or a callable, "
            f"got {type(window).__name__}"
        )
    window_np(fn, window, 4)  # a bad name or parameter fails here, with the window's message
    try:
        hash(window)
    except TypeError:
        raise TypeError(f"{fn}: window {window!r} must be hashable") from None


def window_bandwidth_np(fn: str, window: Any) -> float:
    """librosa.filters.window_bandwidth: n * sum(w**2) / sum(w)**2 over n = 1000 points, or
    librosa's table value for a tabulated name (also a callable's __name__)."""
    key = getattr(window, "__name__", window)
    if isinstance(key, str) and key in _WINDOW_BANDWIDTHS:
        return _WINDOW_BANDWIDTHS[key]
    win = window_np(fn, window, 1000)
    return float(1000 * np.sum(win**2) / (np.sum(win) ** 2 + np.finfo(np.float64).tiny))


def relative_bandwidth_np(freqs: np.ndarray) -> np.ndarray:
    """librosa.filters._relative_bandwidth: alpha[k] = (2**(2 / bpo[k]) - 1) / (2**(2 / bpo[k])
    + 1) with bpo[k] the local bins per octave (a centred log2 difference, one-sided at the
    ends). Needs at least 2 frequencies."""
    logf = np.log2(freqs)
    bpo = np.empty_like(freqs)
    bpo[0] = 1 / (logf[1] - logf[0])
    bpo[-1] = 1 / (logf[-1] - logf[-2])
    bpo[1:-1] = 2 / (logf[2:] - logf[:-2])
    return (2.0 ** (2 / bpo) - 1) / (2.0 ** (2 / bpo) + 1)


def _check_freqs(fn: str, freqs: Any) -> np.ndarray:
    try:
        f = np.asarray(freqs, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: freqs must be a 1-D array of numbers") from None
    if f.ndim != 1 or f.size == 0:
        raise ValueError(f"{fn}: freqs must be a non-empty 1-D array, got shape {f.shape}")
    if not np.all(np.isfinite(f)) or np.any(f <= 0):
        raise ValueError(f"{fn}: freqs must be finite and strictly positive")
    if f.size > 1 and np.any(f[:-1] >= f[1:]):
        raise ValueError(f"{fn}: freqs must be strictly ascending")
    return f


def _check_alpha(fn: str, alpha: Any, f: np.ndarray) -> np.ndarray:
    if alpha is None:
        if f.size == 1:
            raise ValueError(f"{fn}: a single frequency needs alpha (its relative bandwidth)")
        return relative_bandwidth_np(f)
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim > 1 or (a.ndim == 1 and a.size not in (1, f.size)):
        raise ValueError(f"{fn}: alpha must be a number or one value per frequency")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{fn}: alpha must be finite and positive, got {alpha!r}")
    return a


def wavelet_lengths_np(
    fn: str,
    freqs: np.ndarray,
    sr: float,
    window: Any,
    filter_scale: float,
    gamma: float | None,
    alpha: np.ndarray,
) -> tuple[np.ndarray, float]:
    """librosa.filters.wavelet_lengths on checked arguments: (lengths, f_cutoff) with
    Q = filter_scale / alpha, lengths = Q * sr / (freqs + gamma / alpha) and f_cutoff the
    highest filter's reach freqs * (1 + bandwidth(window) / (2 Q)) + gamma / 2; gamma None is
    the ERB-proportional offset 24.7 * alpha / 0.108."""
    gamma_: Any = alpha * 24.7 / 0.108 if gamma is None else gamma
    q = float(filter_scale) / alpha
    f_cutoff = float(np.max(freqs * (1 + 0.5 * window_bandwidth_np(fn, window) / q) + 0.5 * gamma_))
    return q * sr / (freqs + gamma_ / alpha), f_cutoff


def check_norm(fn: str, norm: Any) -> Any:
    """librosa.util.normalize's norms: None, +-inf, 0 or a positive number."""
    if norm is None:
        return None
    if isinstance(norm, bool) or not isinstance(norm, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: norm must be None or a number, got {type(norm).__name__}")
    if np.isnan(norm) or (np.isfinite(norm) and norm < 0):
        raise ValueError(f"{fn}: norm must be None, +-inf, 0 or a positive number, got {norm!r}")
    return norm


def wavelet_np(
    fn: str,
    freqs: np.ndarray,
    sr: float,
    window: Any,
    filter_scale: float,
    norm: Any,
    gamma: float | None,
    alpha: np.ndarray,
    pad_fft: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """librosa.filters.wavelet on checked arguments, in complex128: (filters, lengths).

    Filter k is exp(2j pi freqs[k] n / sr) for n in arange(-len_k // 2, len_k // 2) times the
    periodic window of that many points, normalised (librosa.util.normalize) and centred in a
    row of max(lengths) samples rounded up to a power of 2 (pad_fft) or to an integer.
    """
    lengths, _ = wavelet_lengths_np(fn, freqs, sr, window, filter_scale, gamma, alpha)
    max_len = float(np.max(lengths))
    size = int(2.0 ** np.ceil(np.log2(max_len))) if pad_fft else int(np.ceil(max_len))
    tiny = float(np.finfo(np.float64).tiny)
    out = np.zeros((freqs.size, size), dtype=np.complex128)
    for k, (ilen, freq) in enumerate(zip(lengths, freqs, strict=True)):
        # The expression and its order are librosa's, so the phases round identically.
        x = np.arange(-ilen // 2, ilen // 2, dtype=float) * 2 * np.pi * freq / sr
        sig = (np.cos(x) + 1j * np.sin(x)) * window_np(fn, window, x.size)
        if norm is not None:
            sig = _normalize_rows(fn, sig, norm, tiny)
        lpad = (size - sig.size) // 2
        out[k, lpad : lpad + sig.size] = sig
    return out, lengths


def wavelet_lengths(
    *,
    freqs: Any,
    sr: float = 22050,
    window: Any = "hann",
    filter_scale: float = 1,
    gamma: float | None = 0,
    alpha: Any = None,
) -> tuple[np.ndarray, float]:
    """librosa.filters.wavelet_lengths: the (fractional) length of each filter of a wavelet
    basis and the frequency f_cutoff that all main lobes stay below, as float64 NumPy values
    (host numbers, like librosa's)."""
    fn = "wavelet_lengths"
    f = _check_freqs(fn, freqs)
    rate = chk.number(fn, "sr", sr, positive=True)
    check_wavelet_window(fn, window)
    fs = chk.number(fn, "filter_scale", filter_scale, positive=True)
    g = chk.number(fn, "gamma", gamma, allow_none=True)
    if g is not None and g < 0:
        raise ValueError(f"{fn}: gamma must be None or >= 0, got {gamma!r}")
    a = _check_alpha(fn, alpha, f)
    return wavelet_lengths_np(fn, f, rate, window, fs, g, a)


def wavelet(
    *,
    freqs: Any,
    sr: float = 22050,
    window: Any = "hann",
    filter_scale: float = 1,
    pad_fft: bool = True,
    norm: Any = 1,
    dtype: Any = np.complex64,
    gamma: float | None = 0,
    alpha: Any = None,
    device: Any = None,
) -> tuple[GPUArray, np.ndarray]:
    """librosa.filters.wavelet: (the [len(freqs), n] complex filter bank as a GPUArray, the
    float64 filter lengths as a NumPy array). Built in float64 and rounded once to ``dtype``
    (complex64 or complex128); gamma=None is the ERB-proportional offset (wavelet_lengths).

    Deviation: no np.pad keyword arguments (zero padding only).
    """
    fn = "wavelet"
    f = _check_freqs(fn, freqs)
    rate = chk.number(fn, "sr", sr, positive=True)
    check_wavelet_window(fn, window)
    fs = chk.number(fn, "filter_scale", filter_scale, positive=True)
    nm = check_norm(fn, norm)
    g = chk.number(fn, "gamma", gamma, allow_none=True)
    if g is not None and g < 0:
        raise ValueError(f"{fn}: gamma must be None or >= 0, got {gamma!r}")
    a = _check_alpha(fn, alpha, f)
    dt = as_dtype(dtype)
    if dt.name not in ("complex64", "complex128"):
        raise TypeError(f"{fn}: dtype must be complex64 or complex128, got {dt.name}")
    filters, lengths = wavelet_np(fn, f, rate, window, fs, nm, g, a, bool(pad_fft))
    return from_numpy(filters.astype(dt.np_dtype), device=device), lengths
