"""load and write through soundfile; load's resampling and mono mixdown against librosa.load
(res_type='polyphase')."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import FIXTURES, SPEECH, rel_err, up

librosa = pytest.importorskip("librosa")
sf = pytest.importorskip("soundfile")


def test_load_native_rate_and_resampled() -> None:
    path = FIXTURES / SPEECH["fox_22k"][0]
    y, sr = pa.load(path, sr=None)
    ref, ref_sr = librosa.load(path, sr=None)
    assert sr == ref_sr == 22050 and y.dtype is gp.float32
    np.testing.assert_array_equal(y.to_numpy(), ref)
    y16, sr16 = pa.load(path, sr=16000, offset=0.25, duration=1.0)
    ref16, _ = librosa.load(path, sr=16000, offset=0.25, duration=1.0, res_type="polyphase")
    assert sr16 == 16000
    assert rel_err(y16, ref16) <= 1e-5


def test_write_then_load_stereo_mono(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    stereo = rng.uniform(-0.5, 0.5, size=(2, 4000)).astype(np.float32)
    path = tmp_path / "stereo.wav"
    pa.write(path, up(stereo), 8000, subtype="FLOAT")
    both, sr = pa.load(path, sr=None, mono=False)
    assert sr == 8000
    np.testing.assert_array_equal(both.to_numpy(), stereo)
    mono, _ = pa.load(path, sr=None)
    ref, _ = librosa.load(path, sr=None)
    np.testing.assert_allclose(mono.to_numpy(), ref, rtol=1e-6, atol=1e-7)
