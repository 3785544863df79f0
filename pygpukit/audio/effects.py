"""Time-domain effects in librosa's names (librosa.effects): time_stretch, hpss, harmonic,
percussive.

time_stretch: stft -> phase_vocoder -> istft, all on the device, with librosa's argument
routing: the same STFT keywords go to stft and istft, and hop_length / n_fft (None when not
given) to phase_vocoder. hpss / harmonic / percussive: stft -> decompose.hpss -> istft of each
part, cut to the input's length.
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio.decompose import HpssArgs, separate
from pygpukit.audio.spectrum import check_stft, istft, stft
from pygpukit.audio.vocoder import phase_vocoder

__all__ = ["harmonic", "hpss", "percussive", "time_stretch"]

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


def _hpss_waves(
    fn: str,
    y: Any,
    want: tuple[bool, bool],
    kernel_size: Any,
    power: Any,
    mask: Any,
    margin: Any,
    n_fft: Any,
    hop_length: Any,
    win_length: Any,
    window: Any,
    center: Any,
    pad_mode: Any,
) -> tuple[GPUArray | None, GPUArray | None]:
    """The waveforms of the parts in ``want`` (harmonic, percussive); every argument is checked
    before the STFT runs."""
    x, _ = check_stft(fn, y, n_fft, hop_length, win_length, window, center, pad_mode)
    a = HpssArgs(fn, kernel_size, power, mask, margin)
    if mask:
        raise ValueError(
            f"{fn}: mask=True gives masks, not spectra, so there is no waveform to invert; "
            "use pygpukit.audio.decompose.hpss(stft(y), mask=True)"
        )
    kw = {"n_fft": n_fft, "hop_length": hop_length, "win_length": win_length, "window": window}
    spec = stft(x, center=center, pad_mode=pad_mode, **kw)
    parts = separate(spec, a, False, want)
    return tuple(  # type: ignore[return-value]
        None
        if part is None
        else istft(part, dtype=x.dtype, center=center, length=x.shape[-1], **kw)
        for part in parts
    )


def hpss(
    y: Any,
    *,
    kernel_size: Any = 31,
    power: float = 2.0,
    mask: bool = False,
    margin: Any = 1.0,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
) -> tuple[GPUArray, GPUArray]:
    """librosa.effects.hpss: (y_harmonic, y_percussive), each [..., n] in y's dtype: the STFT
    of y split by decompose.hpss (kernel_size, power, margin) and inverted with the same STFT
    parameters, cut to y's length.

    Deviations: ``window`` is used by stft and istft (librosa 0.11 takes the argument but always
    computes with the default Hann window; the two agree for window='hann'); mask=True raises
    ValueError (librosa inverts the real masks as if they were spectra).
    """
    h, p = _hpss_waves(
        "hpss", y, (True, True), kernel_size, power, mask, margin,
        n_fft, hop_length, win_length, window, center, pad_mode,
    )  # fmt: skip
    assert h is not None and p is not None
    return h, p


def harmonic(
    y: Any,
    *,
    kernel_size: Any = 31,
    power: float = 2.0,
    mask: bool = False,
    margin: Any = 1.0,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
) -> GPUArray:
    """librosa.effects.harmonic: hpss(y, ...)[0], without inverting the percussive part (the
    same deviations as hpss)."""
    h, _ = _hpss_waves(
        "harmonic", y, (True, False), kernel_size, power, mask, margin,
        n_fft, hop_length, win_length, window, center, pad_mode,
    )  # fmt: skip
    assert h is not None
    return h


def percussive(
    y: Any,
    *,
    kernel_size: Any = 31,
    power: float = 2.0,
    mask: bool = False,
    margin: Any = 1.0,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
) -> GPUArray:
    """librosa.effects.percussive: hpss(y, ...)[1], without inverting the harmonic part (the
    same deviations as hpss)."""
    _, p = _hpss_waves(
        "percussive", y, (False, True), kernel_size, power, mask, margin,
        n_fft, hop_length, win_length, window, center, pad_mode,
    )  # fmt: skip
    assert p is not None
    return p
