"""melspectrogram and mfcc against librosa in float64 (mel bank in float64 too).

Bounds: melspectrogram is linear in the power spectrogram: relative norm error <= 1e-5. Its dB
values differ by at most MEL_DB_ATOL: a mel band's float32 error is relative to the frame's
energy, not the band's, so quiet bands (down to the 80 dB floor) carry relative errors up to
~1e-4 (4e-4 dB); observed max 2e-4 dB. mfcc is the orthonormal DCT of those dB values times
the lifter: each coefficient's error is at most ||dB error||_2 <= sqrt(n_mels) * MEL_DB_ATOL,
scaled by the largest lifter factor 1 + lifter / 2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, speech, up32

librosa = pytest.importorskip("librosa")

RTOL = 1e-5
MEL_DB_ATOL = 2e-3

MEL_CASES = [
    {},
    {"sr": 16000, "n_fft": 400, "hop_length": 160, "n_mels": 80, "fmax": 8000.0},
    {"n_mels": 40, "htk": True, "norm": None, "power": 1.0},
    {"n_fft": 1024, "hop_length": 256, "power": 1.5, "pad_mode": "reflect", "window": "hamming"},
]


def _ids(kw: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in kw.items()) or "defaults"


@pytest.mark.parametrize("kind", sorted(SYNTH))
@pytest.mark.parametrize("kw", MEL_CASES, ids=_ids)
def test_melspectrogram(kind: str, kw: dict) -> None:
    rng = np.random.default_rng(len(kind) + len(kw))
    y = SYNTH[kind](kw.get("sr", 22050), 0.6, rng)
    ref = librosa.feature.melspectrogram(y=y, dtype=np.float64, **kw)
    out = pa.feature.melspectrogram(y=up32(y), **kw)
    assert out.dtype is gp.float32
    assert rel_err(out, ref) <= RTOL
    # A magnitude (power 1) spectrogram goes to dB with amplitude_to_db: its 80 dB span is a
    # 1e4 ratio (power_to_db's would be 1e8 in magnitude, past float32's reach in any code).
    to_db, lib_to_db = (
        (pa.amplitude_to_db, librosa.amplitude_to_db)
        if kw.get("power") == 1.0
        else (pa.power_to_db, librosa.power_to_db)
    )
    db = to_db(out, ref=np.max).to_numpy()
    assert np.abs(db - lib_to_db(ref, ref=np.max)).max() <= MEL_DB_ATOL


def test_melspectrogram_from_S_and_batched_rows() -> None:
    rng = np.random.default_rng(3)
    ys = np.stack([SYNTH[k](22050, 0.5, rng) for k in ("chirp", "tones", "clicks")])
    spec = np.abs(librosa.stft(ys, n_fft=1024, dtype=np.complex128)) ** 2
    ref = librosa.feature.melspectrogram(S=spec, n_mels=64, dtype=np.float64)
    out = pa.feature.melspectrogram(S=up32(spec), n_mels=64)
    assert rel_err(out, ref) <= RTOL
    batched = pa.feature.melspectrogram(y=up32(ys), n_fft=1024).to_numpy()
    for i in range(3):
        row = pa.feature.melspectrogram(y=up32(ys[i]), n_fft=1024).to_numpy()
        np.testing.assert_array_equal(batched[i], row)


@pytest.mark.parametrize("lifter", [0, 22])
@pytest.mark.parametrize("kw", [{}, {"n_mfcc": 13, "n_mels": 40, "dct_type": 3}], ids=_ids)
def test_mfcc(lifter: int, kw: dict) -> None:
    rng = np.random.default_rng(lifter)
    ys = np.stack([SYNTH["chirp"](22050, 0.6, rng), SYNTH["clicks"](22050, 0.6, rng)])
    ref = librosa.feature.mfcc(y=ys, lifter=lifter, dtype=np.float64, **kw)
    out = pa.feature.mfcc(y=up32(ys), lifter=lifter, **kw)
    assert out.shape == ref.shape
    n_mels = kw.get("n_mels", 128)
    bound = (1 + lifter / 2) * math.sqrt(n_mels) * MEL_DB_ATOL
    assert np.abs(out.to_numpy() - ref).max() <= bound
    assert rel_err(out, ref) <= RTOL


def test_mfcc_from_log_mel() -> None:
    rng = np.random.default_rng(8)
    s_db = rng.uniform(-80, 0, size=(2, 64, 50)).astype(np.float32).astype(np.float64)
    ref = librosa.feature.mfcc(S=s_db, n_mfcc=20, norm=None)
    out = pa.feature.mfcc(S=up32(s_db), n_mfcc=20, norm=None)
    assert rel_err(out, ref) <= RTOL


@pytest.mark.parametrize("name", ["fox_22k", "hello_16k", "numbers_16k"])
def test_speech_features(name: str) -> None:
    y, sr = speech(name)
    kw = {"sr": sr, "n_fft": 2048 if sr == 22050 else 512, "n_mels": 64}
    ref = librosa.feature.melspectrogram(y=y, dtype=np.float64, **kw)
    assert rel_err(pa.feature.melspectrogram(y=up32(y), **kw), ref) <= RTOL
    ref_m = librosa.feature.mfcc(y=y, dtype=np.float64, **kw)
    out_m = pa.feature.mfcc(y=up32(y), **kw)
    assert np.abs(out_m.to_numpy() - ref_m).max() <= math.sqrt(64) * MEL_DB_ATOL
