"""``pygpukit.audio``: librosa's names, defaults and conventions on GPUArrays.

``import pygpukit.audio as librosa`` and the common calls run on the device: ``stft``, ``istft``,
``magphase``, ``power_to_db`` ..., ``feature.melspectrogram``, ``feature.mfcc``,
``filters.mel``, ``griffinlim``, ``phase_vocoder``, ``effects.time_stretch``,
``onset.onset_strength``, ``onset.onset_detect``, ``resample``, ``load``; plus Whisper's
log-mel front end (``whisper_features.log_mel_spectrogram``). Inputs are GPUArrays
[..., samples] (NumPy arrays are uploaded to the default device), results are GPUArrays
(onset_detect's event lists come back as NumPy arrays). Everything composes routed ops
(``gp.fft``, ``gp.matmul``, elementwise ops, reductions, strided views), so the same code runs
on the GPU (Triton/native) and on the CPU (NumPy). Each function's docstring notes any
deviation from librosa.
"""

from __future__ import annotations

from pygpukit.audio import effects, feature, filters, onset
from pygpukit.audio.convert import (
    amplitude_to_db,
    db_to_amplitude,
    db_to_power,
    fft_frequencies,
    hz_to_mel,
    mel_frequencies,
    mel_to_hz,
    power_to_db,
)
from pygpukit.audio.filters import get_window, mel_filters
from pygpukit.audio.griffinlim import griffinlim
from pygpukit.audio.io import load, write
from pygpukit.audio.resample import resample
from pygpukit.audio.spectrum import istft, magphase, stft
from pygpukit.audio.vocoder import phase_vocoder
from pygpukit.audio.whisper_features import log_mel_spectrogram

__all__ = [
    "amplitude_to_db",
    "db_to_amplitude",
    "db_to_power",
    "effects",
    "feature",
    "fft_frequencies",
    "filters",
    "get_window",
    "griffinlim",
    "hz_to_mel",
    "istft",
    "load",
    "log_mel_spectrogram",
    "magphase",
    "mel_filters",
    "mel_frequencies",
    "mel_to_hz",
    "onset",
    "phase_vocoder",
    "power_to_db",
    "resample",
    "stft",
    "write",
]
