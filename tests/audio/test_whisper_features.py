"""log_mel_spectrogram against HF transformers' WhisperFeatureExtractor (its NumPy path).

Bound: the features are (log10(mel) + 4) / 4 with HF's own FFT rounded to complex64; an
absolute error of 5e-5 is 2e-4 in log10 (a relative mel error of 5e-4, 0.002 dB). Observed
max about 6e-6 on the CPU (the NumPy backend computes in float64). On a GPU the FFT is fp32
(tf32x3 products, errors about 2e-7 of a frame's norm): a mel band far below its frame's
loudest carries that error relative to its own, much smaller power, so the bound there is
2e-4 (8e-4 in log10, 0.008 dB); measured on an H100 (2026-11-27) 6.2e-5 before the power
spectrum was taken in the FFT's stores and 7.6e-5 after, on the chirp row below.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, speech, up32

transformers = pytest.importorskip("transformers")

ATOL = 2e-4 if DEVICE.startswith("cuda") else 5e-5


def _hf(y: np.ndarray, n_mels: int) -> np.ndarray:
    fe = transformers.WhisperFeatureExtractor(feature_size=n_mels)
    return fe(y, sampling_rate=16000, return_tensors="np").input_features


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("name", ["hello_16k", "numbers_16k"])
def test_speech_matches_hf(name: str, n_mels: int) -> None:
    y, _ = speech(name)
    ref = _hf(y.astype(np.float32), n_mels)[0]
    out = pa.log_mel_spectrogram(up32(y), n_mels=n_mels)
    assert out.shape == (n_mels, 3000) and out.dtype is gp.float32
    assert np.abs(out.to_numpy() - ref).max() <= ATOL


def test_batch_rows_padding_and_truncation() -> None:
    rng = np.random.default_rng(0)
    short = SYNTH["chirp"](16000, 1.3, rng).astype(np.float32)
    long = rng.uniform(-0.5, 0.5, size=16000 * 31).astype(np.float32)  # cut to 30 s
    batch = np.stack([np.pad(short, (0, long.size - short.size)), long])
    out = pa.log_mel_spectrogram(up32(batch)).to_numpy()
    assert out.shape == (2, 80, 3000)
    # HF pads each row to 30 s (the padded short row equals the bare short row there).
    assert np.abs(out[0] - _hf(short, 80)[0]).max() <= ATOL
    assert np.abs(out[1] - _hf(long, 80)[0]).max() <= ATOL
    np.testing.assert_array_equal(out[0], pa.log_mel_spectrogram(up32(short)).to_numpy())


def test_no_padding_keeps_length() -> None:
    y, _ = speech("hello_16k")
    out = pa.log_mel_spectrogram(up32(y), chunk_length=None)
    assert out.shape == (80, y.size // 160)
    full = pa.log_mel_spectrogram(up32(y)).to_numpy()
    # Same frames except the per-row maximum (the padding's silent frames do not raise it).
    assert np.abs(out.to_numpy()[:, :100] - full[:, :100]).max() <= ATOL
