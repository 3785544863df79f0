"""Spectral features in librosa's names (librosa.feature): melspectrogram and mfcc.

Both are matrix products on the device: the power spectrogram times the mel filter bank (one
matmul over all frames and rows of the batch), and the log-mel spectrogram times the DCT-II
matrix (one matmul, the lifter folded into its rows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio._complex import abs_pow
from pygpukit.audio._tables import device_table, device_table_of
from pygpukit.audio.convert import power_to_db
from pygpukit.audio.filters import dct_np, mel_np
from pygpukit.audio.spectrum import check_stft, stft_frames
from pygpukit.dtypes import as_dtype

__all__ = ["melspectrogram", "mfcc"]

_MEL_KWARGS = ("n_mels", "fmin", "fmax", "htk", "norm", "dtype")


def _mel_basis(fn: str, sr: float, n_fft: int, kwargs: dict[str, Any], like: GPUArray) -> GPUArray:
    """librosa.filters.mel(sr=sr, n_fft=n_fft, **kwargs) on like's device, in kwargs' dtype or
    else like's (librosa defaults to float32 even for float64 spectra; here a float64 spectrum
    gets a float64 bank)."""
    unknown = sorted(set(kwargs) - set(_MEL_KWARGS))
    if unknown:
        raise TypeError(f"{fn}: unexpected keyword argument(s) {unknown}")
    n_mels = int(chk.positive_int(fn, "n_mels", kwargs.get("n_mels", 128)) or 0)
    fmin = chk.number(fn, "fmin", kwargs.get("fmin", 0.0))
    fmax = chk.number(fn, "fmax", kwargs.get("fmax"), allow_none=True)
    norm = kwargs.get("norm", "slaney")
    dt = as_dtype(kwargs["dtype"]) if kwargs.get("dtype") is not None else like.dtype
    if dt.kind != "f":
        raise TypeError(f"{fn}: dtype must be a float type, got {dt.name}")
    tiny = float(np.finfo(dt.np_dtype).tiny)
    # Cached by its parameters: mel_np's empty-filter warning comes with the first build only.
    args = (sr, n_fft, n_mels, fmin, fmax, bool(kwargs.get("htk", False)), norm, tiny)
    return device_table_of(("mel", *args), lambda: mel_np(fn, *args), dt.np_dtype, like.device)


def melspectrogram(
    *,
    y: Any = None,
    sr: float = 22050,
    S: Any = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    **kwargs: Any,
) -> GPUArray:
    """librosa.feature.melspectrogram: mel_basis @ |stft(y)| ** power, [..., n_mels, frames].

    With S (a [..., 1 + n_fft // 2, frames] magnitude or power spectrogram) the STFT is skipped
    and n_fft is taken from S's frequency axis. kwargs go to the mel filter bank (n_mels=128,
    fmin=0.0, fmax=sr / 2, htk=False, norm='slaney', dtype). The result from y is a view with the
    frame axis last over frame-major storage (see stft).
    """
    fn = "melspectrogram"
    rate = chk.number(fn, "sr", sr, positive=True)
    pw = chk.number(fn, "power", power, positive=True)
    if S is not None:
        spec = chk.signal(fn, "S", S, min_ndim=2)
        nfft = 2 * (spec.shape[-2] - 1)
        if nfft <= 0:
            raise ValueError(f"{fn}: S has {spec.shape[-2]} frequency bins; it needs at least 2")
        basis = _mel_basis(fn, rate, nfft, kwargs, spec)
        return ops.matmul(basis, spec)
    if y is None:
        raise ValueError(f"{fn}: pass either y (a signal) or S (a spectrogram)")
    x, p = check_stft(fn, y, n_fft, hop_length, win_length, window, center, pad_mode)
    basis = _mel_basis(fn, rate, p.n_fft, kwargs, x)
    if pw in (1.0, 2.0):  # the magnitude or power as the FFT stores
        spec, lead = stft_frames(x, p, center, pad_mode, power=pw)
    else:
        z, lead = stft_frames(x, p, center, pad_mode)
        spec = abs_pow(z, pw)
    mel = ops.matmul(spec, basis.T)  # [batch, frames, n_mels]
    return mel.reshape(*lead, *mel.shape[1:]).swapaxes(-1, -2)


def mfcc(
    *,
    y: Any = None,
    sr: float = 22050,
    S: Any = None,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: Any = "ortho",
    lifter: float = 0,
    **kwargs: Any,
) -> GPUArray:
    """librosa.feature.mfcc: the first n_mfcc DCT coefficients of the log-power mel spectrogram
    power_to_db(melspectrogram(y=y, sr=sr, **kwargs)), [..., n_mfcc, frames].

    S, when given, is that log-power mel spectrogram [..., n_mels, frames]. dct_type 2 or 3
    (scipy.fft.dct's, norm 'ortho' or None; type 1 is not served). lifter > 0 scales coefficient
    k by 1 + (lifter / 2) * sin(pi * (k + 1) / lifter), folded into the DCT matrix. As in
    librosa, the 80 dB floor of power_to_db is taken over the whole array (all rows of a batch).
    """
    fn = "mfcc"
    nm = int(chk.positive_int(fn, "n_mfcc", n_mfcc) or 0)
    lift = chk.number(fn, "lifter", lifter)
    if lift < 0:
        raise ValueError(f"{fn}: lifter must be a non-negative number, got {lifter!r}")
    if dct_type not in (2, 3) or isinstance(dct_type, bool):
        raise ValueError(f"{fn}: dct_type must be 2 or 3, got {dct_type!r}")
    if norm not in ("ortho", None):
        raise ValueError(f"{fn}: norm must be 'ortho' or None, got {norm!r}")
    if S is not None:
        log_mel = chk.signal(fn, "S", S, min_ndim=2)
    else:
        if y is None:
            raise ValueError(f"{fn}: pass either y (a signal) or S (a log-power mel spectrogram)")
        n_mels = kwargs.get("n_mels", 128)
        if isinstance(n_mels, int) and not isinstance(n_mels, bool) and 0 < n_mels < nm:
            raise ValueError(f"{fn}: n_mfcc={nm} must be <= n_mels={n_mels}")
        log_mel = power_to_db(melspectrogram(y=y, sr=sr, **kwargs))
    n_in = log_mel.shape[-2]
    if nm > n_in:
        raise ValueError(f"{fn}: n_mfcc={nm} must be <= the {n_in} mel bands of S")
    d = dct_np(fn, nm, n_in, dct_type, norm)
    if lift > 0:
        d = d * (1.0 + (lift / 2.0) * np.sin(math.pi * np.arange(1, 1 + nm) / lift))[:, None]
    basis = device_table(d, log_mel.dtype.np_dtype, log_mel.device)
    return ops.matmul(basis, log_mel)
