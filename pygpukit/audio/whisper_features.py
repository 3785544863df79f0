"""Whisper's log-mel front end on the device, matching HF transformers'
WhisperFeatureExtractor (its NumPy path) and OpenAI Whisper's log_mel_spectrogram.

Steps (those of both references): zero-pad or cut each row to chunk_length seconds; STFT with a
periodic Hann window, n_fft 400, hop 160, reflect padding by n_fft // 2; drop the last frame;
power spectrum times the Slaney-normalised Slaney-scale mel bank (0 to 8 kHz, as HF fixes it);
log10 of max(1e-10, .); floor at the row's maximum minus 8 (80 dB); then (x + 4) / 4.
"""

from __future__ import annotations

import math
from typing import Any

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio._tables import device_table_of
from pygpukit.audio.filters import mel_np
from pygpukit.audio.spectrum import _Params
from pygpukit.ops.fft import rfft_frames

__all__ = ["log_mel_spectrogram"]

_LOG10_E = 1.0 / math.log(10.0)


def log_mel_spectrogram(
    audio: Any,
    n_mels: int = 80,
    *,
    sampling_rate: int = 16000,
    n_fft: int = 400,
    hop_length: int = 160,
    chunk_length: int | None = 30,
) -> GPUArray:
    """Whisper input features of audio [samples] or [batch, samples] (float32/float64 at
    sampling_rate): [n_mels, frames] or [batch, n_mels, frames], contiguous.

    n_mels is 80 (Whisper up to large-v2) or 128 (large-v3); any positive count is served. With
    chunk_length (seconds) every row is zero-padded or cut to chunk_length * sampling_rate
    samples first (HF's padding='max_length', truncation=True), giving 3000 frames at the
    defaults; chunk_length=None keeps the length (samples // hop_length frames).

    The 8 (log10) dynamic-range floor is per row, as HF does it (OpenAI's function takes one
    maximum over the whole batch). HF's do_normalize and dither options (both off for Whisper)
    are not served.
    """
    fn = "log_mel_spectrogram"
    x = chk.signal(fn, "audio", audio)
    if x.ndim > 2:
        raise ValueError(f"{fn}: audio must be [samples] or [batch, samples], got shape {x.shape}")
    nm = int(chk.positive_int(fn, "n_mels", n_mels) or 0)
    sr = int(chk.positive_int(fn, "sampling_rate", sampling_rate) or 0)
    p = _Params(fn, n_fft, hop_length, None, "hann")
    n_target = None
    if chunk_length is not None:
        n_target = int(chk.positive_int(fn, "chunk_length", chunk_length) or 0) * sr
    n = x.shape[-1] if n_target is None else n_target
    _frames.check_pad(fn, n, p.n_fft // 2, "reflect")
    if n // p.hop_length < 1:
        raise ValueError(f"{fn}: audio of {n} samples gives no frame at hop_length={p.hop_length}")
    args = (float(sr), p.n_fft, nm, 0.0, 8000.0, False, "slaney", 0.0)
    basis = device_table_of(("mel", *args), lambda: mel_np(fn, *args), x.dtype.np_dtype, x.device)

    rows = x.reshape(1, -1) if x.ndim == 1 else x
    rows = rows.contiguous()
    if n_target is not None and rows.shape[-1] != n_target:
        keep = min(n_target, rows.shape[-1])
        rows = _frames.pad_rows(rows[:, :keep].contiguous(), 0, n_target - keep, "constant")
    pad = p.n_fft // 2
    n_frames = 1 + (rows.shape[-1] + 2 * pad - p.n_fft) // p.hop_length - 1  # both references
    # drop the last frame
    win = p.device_window(rows)
    power = rfft_frames(
        rows, win, hop=p.hop_length, pad=pad, pad_mode="reflect", n_frames=n_frames, power=2
    )
    # basis @ power^T gives [batch, n_mels, frames] in the result's own layout (no transpose
    # copy); (max(log10 m, top - 8) + 4) / 4 = max(log10(m) / 4 + 1, top' - 2) with top' the
    # maximum of log10(m) / 4 + 1: the scale and shift once, before the floor.
    mel = ops.matmul(basis, power.swapaxes(1, 2))
    feats = ops.log(ops.maximum(mel, 1e-10)) * (0.25 * _LOG10_E) + 1.0
    floor = ops.max(feats, axis=(1, 2), keepdims=True) - 2.0
    out = ops.maximum(feats, floor)
    return out[0] if x.ndim == 1 else out
