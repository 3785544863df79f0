"""power_to_db, amplitude_to_db, db_to_power and db_to_amplitude against librosa in float64.

Bounds: dB values are 10 * log10 of float32 inputs computed as (10 / ln 10) * ln(x) in float32:
ln(x) carries a relative rounding of ~6e-8, i.e. an absolute error of ~6e-8 * |ln x| <= 2e-6
for |ln x| <= 25 (the 1e-10 amin), times 4.34 dB: < 1e-5 dB; plus the input's own float32
rounding (6e-8 relative -> 2.6e-7 dB). 1e-4 dB leaves a margin of ten and is far below any
audible or feature-relevant difference. The inverse conversions are exp() of float32
arguments up to |S_db| * 0.23 <= 23: relative error ~ 23 * 6e-8 = 1.4e-6 -> rtol 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, up, up32

librosa = pytest.importorskip("librosa")

DB_ATOL = 1e-4


def _power(rng: np.random.Generator) -> np.ndarray:
    y = np.stack([SYNTH["chirp"](8000, 0.5, rng), SYNTH["clicks"](8000, 0.5, rng)])
    s = np.abs(librosa.stft(y, n_fft=256, dtype=np.complex128)) ** 2
    s[0, :, 3] = 0.0  # a silent frame: clamped to amin
    return s.astype(np.float32).astype(np.float64)  # exactly representable in float32


@pytest.mark.parametrize("ref", [1.0, 3.5, np.max, np.mean])
@pytest.mark.parametrize("top_db", [80.0, None, 20.0])
def test_power_to_db(ref: object, top_db: float | None) -> None:
    s = _power(np.random.default_rng(0))
    want = librosa.power_to_db(s, ref=ref, top_db=top_db)
    got = pa.power_to_db(up32(s), ref=ref, top_db=top_db)
    assert got.dtype is gp.float32
    assert np.abs(got.to_numpy() - want).max() <= DB_ATOL


@pytest.mark.parametrize("ref", [1.0, np.max])
def test_amplitude_to_db(ref: object) -> None:
    s = np.sqrt(_power(np.random.default_rng(1))).astype(np.float32).astype(np.float64)
    want = librosa.amplitude_to_db(s, ref=ref, amin=1e-5, top_db=80.0)
    got = pa.amplitude_to_db(up32(s), ref=ref)
    assert np.abs(got.to_numpy() - want).max() <= DB_ATOL


def test_complex_input_takes_magnitude() -> None:
    rng = np.random.default_rng(4)
    d = librosa.stft(SYNTH["tones"](8000, 0.3, rng), n_fft=256).astype(np.complex64)
    with pytest.warns(UserWarning):
        want = librosa.amplitude_to_db(d.astype(np.complex128))
    with pytest.warns(UserWarning, match="phase information will be discarded"):
        got = pa.amplitude_to_db(up(d))
    assert np.abs(got.to_numpy() - want).max() <= DB_ATOL


def test_db_inverses() -> None:
    s_db = np.random.default_rng(2).uniform(-100, 20, size=(30, 17))
    s_db = s_db.astype(np.float32).astype(np.float64)
    for ref in (1.0, 2.5):
        want = librosa.db_to_power(s_db, ref=ref)
        got = pa.db_to_power(up32(s_db), ref=ref).to_numpy()
        assert np.all(np.abs(got - want) <= 1e-5 * np.abs(want))
        want = librosa.db_to_amplitude(s_db, ref=ref)
        got = pa.db_to_amplitude(up32(s_db), ref=ref).to_numpy()
        assert np.all(np.abs(got - want) <= 1e-5 * np.abs(want))
