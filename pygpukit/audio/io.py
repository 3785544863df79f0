"""Audio files: load (librosa.load's name and conventions) and write, through the
``soundfile`` package (libsndfile: WAV, FLAC, OGG/Vorbis, ...), an optional dependency imported
on first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio.resample import resample
from pygpukit.creation import from_numpy

__all__ = ["load", "write"]


def _soundfile(fn: str) -> Any:
    try:
        import soundfile
    except ImportError:
        raise ImportError(
            f"{fn}: reading and writing audio files needs the soundfile package "
            "(pip install soundfile)"
        ) from None
    return soundfile


def load(
    path: Any,
    *,
    sr: float | None = 22050,
    mono: bool = True,
    offset: float = 0.0,
    duration: float | None = None,
    dtype: Any = np.float32,
    res_type: str = "polyphase",
    device: Any = None,
) -> tuple[GPUArray, float]:
    """librosa.load: (y, sr) with y [samples] (mono) or [channels, samples], floats in [-1, 1).

    sr=None keeps the file's rate; otherwise the signal is resampled on the device with
    resample(res_type='polyphase'), so sr must be an integer as must the file's rate. mono
    averages the channels (librosa.to_mono). offset and duration are in seconds.

    Deviation: librosa's default res_type 'soxr_hq' is not served; 'polyphase' is the default.
    """
    fn = "load"
    sf = _soundfile(fn)
    target = chk.number(fn, "sr", sr, positive=True, allow_none=True)
    start_s = chk.number(fn, "offset", offset)
    if start_s < 0:
        raise ValueError(f"{fn}: offset must be >= 0, got {offset!r}")
    dur = chk.number(fn, "duration", duration, positive=True, allow_none=True)
    np_dtype = np.dtype(dtype)
    if np_dtype not in (np.float32, np.float64):
        raise TypeError(f"{fn}: dtype must be float32 or float64, got {np_dtype}")
    chk.choice(fn, "res_type", res_type, ("polyphase",))
    with sf.SoundFile(path) as f:
        native = f.samplerate
        f.seek(min(round(start_s * native), f.frames))
        n = -1 if dur is None else round(dur * native)
        data = f.read(frames=n, dtype=np_dtype.name, always_2d=True)  # [samples, channels]
    y = from_numpy(np.ascontiguousarray(data.T), device=device)  # [channels, samples]
    if mono or y.shape[0] == 1:
        y = ops.mean(y, axis=0) if y.shape[0] > 1 else y[0]
    if target is not None and target != native:
        y = resample(y, orig_sr=native, target_sr=target, res_type=res_type)
        return y, target if target != int(target) else int(target)
    return y, native


def write(path: Any, y: Any, sr: int, *, subtype: str | None = None) -> None:
    """Write y [samples] or [channels, samples] (librosa's channel-first layout) at rate sr;
    the format follows the file name, subtype (e.g. 'PCM_16', 'FLOAT') soundfile's default for
    it when None."""
    fn = "write"
    sf = _soundfile(fn)
    x = chk.signal(fn, "y", y)
    if x.ndim > 2:
        raise ValueError(f"{fn}: y must be [samples] or [channels, samples], got shape {x.shape}")
    rate = int(chk.positive_int(fn, "sr", sr) or 0)
    data = x.to_numpy()
    sf.write(path, data.T if data.ndim == 2 else data, rate, subtype=subtype)
