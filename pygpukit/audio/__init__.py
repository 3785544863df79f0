"""``pygpukit.audio``: librosa's names, defaults and conventions on GPUArrays.

``import pygpukit.audio as librosa`` and the common calls run on the device: ``stft``, ``istft``,
``magphase``, ``power_to_db`` ..., ``feature.melspectrogram``, ``feature.mfcc``,
``filters.mel``, ``griffinlim``, ``phase_vocoder``, ``effects.time_stretch``, ``hpss``
(``decompose.hpss``: harmonic/percussive separation on the routed ``gp.median_filter``) with
``effects.hpss`` / ``harmonic`` / ``percussive``,
``onset.onset_strength``, ``onset.onset_detect``, ``resample``, ``load``, the constant-Q
transforms ``cqt``, ``vqt``, ``pseudo_cqt``, ``hybrid_cqt`` (res_type 'polyphase') with
``filters.wavelet``; plus Whisper's
log-mel front end (``whisper_features.log_mel_spectrogram``), and the pitch trackers ``yin``
and ``pyin`` (pyin's observation model and Viterbi decoding are routed ops, gp.pyin_observations
and gp.viterbi). Inputs are GPUArrays
[..., samples] (NumPy arrays are uploaded to the default device), results are GPUArrays
(onset_detect's event lists come back as NumPy arrays). Everything composes routed ops
(``gp.fft``, ``gp.matmul``, elementwise ops, reductions, strided views), so the same code runs
on the GPU (Triton/native) and on the CPU (NumPy). Each function's docstring notes any
deviation from librosa.
"""

from __future__ import annotations

from pygpukit.audio import decompose, effects, feature, filters, onset
from pygpukit.audio.constantq import cqt, hybrid_cqt, pseudo_cqt, vqt
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
from pygpukit.audio.decompose import hpss
from pygpukit.audio.filters import get_window, mel_filters
from pygpukit.audio.griffinlim import griffinlim
from pygpukit.audio.io import load, write
from pygpukit.audio.pitch import pyin, yin
from pygpukit.audio.resample import resample
from pygpukit.audio.spectrum import istft, magphase, stft
from pygpukit.audio.vocoder import phase_vocoder
from pygpukit.audio.whisper_features import log_mel_spectrogram

__all__ = [
    "amplitude_to_db",
    "cqt",
    "db_to_amplitude",
    "db_to_power",
    "decompose",
    "effects",
    "feature",
    "fft_frequencies",
    "filters",
    "get_window",
    "griffinlim",
    "hpss",
    "hybrid_cqt",
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
    "pseudo_cqt",
    "pyin",
    "resample",
    "stft",
    "vqt",
    "write",
    "yin",
]
