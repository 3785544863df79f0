"""Time-domain effects in librosa's names (librosa.effects): time_stretch.

stft -> phase_vocoder -> istft, all on the device, with librosa's argument routing: the same
STFT keywords go to stft and istft, and hop_length / n_fft (None when not given) to
phase_vocoder.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio.spectrum import check_stft, istft, stft
from pygpukit.audio.vocoder import phase_vocoder

__all__ = ["time_stretch"]

# librosa passes **kwargs to both stft and istft, so only the keywords both accept work there
# (pad_mode or dtype make its istft call fail with a TypeError).
_STFT_KWARGS = ("n_fft", "hop_length", "win_length", "window", "center")


def time_stretch(y: Any, *, rate: float, **kwargs: Any) -> GPUArray:
    """librosa.effects.time_stretch: y [..., n] played ``rate`` times faster without a pitch
    change, [..., round(n / rate)] in y's dtype.

    kwargs: n_fft (2048), hop_length, win_length, window, center, passed to stft and istft as
    librosa does; phase_vocoder gets hop_length and n_fft as given (its own default hop is
    n_fft // 4, stft's win_length // 4, which differ only when win_length < n_fft, as in
    librosa). The phase accumulation is phase_vocoder's (see its note on numerics).
    """
    fn = "time_stretch"
    r = chk.number(fn, "rate", rate, positive=True)
    unknown = sorted(set(kwargs) - set(_STFT_KWARGS))
    if unknown:
        raise TypeError(
            f"{fn}: unexpected keyword argument(s) {unknown}; accepted: {list(_STFT_KWARGS)}"
        )
    x = chk.signal(fn, "y", y)
    check_stft(
        fn,
        x,
        kwargs.get("n_fft", 2048),
        kwargs.get("hop_length"),
        kwargs.get("win_length"),
        kwargs.get("window", "hann"),
        kwargs.get("center", True),
        "constant",
    )
    len_stretch = round(x.shape[-1] / r)
    if len_stretch <= 0:
        raise ValueError(f"{fn}: rate={rate!r} leaves round({x.shape[-1]} / rate) = 0 samples of y")
    spec = stft(x, **kwargs)
    stretched = phase_vocoder(
        spec, rate=r, hop_length=kwargs.get("hop_length"), n_fft=kwargs.get("n_fft")
    )
    return istft(stretched, dtype=x.dtype, length=len_stretch, **kwargs)
