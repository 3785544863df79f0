"""phase_vocoder and effects.time_stretch against librosa.

Reference: librosa on complex128 / float64. librosa accumulates the phase as a running sum in
D's real dtype, so its own complex64 run drifts by ~ulp(accumulated angle) per frame (measured
2e-2 relative on the 0.5x tone case below, 2e-3 on speech): it is not a usable reference. Here
the accumulation is a cumulative product of unit phasors (log-step scan), whose float32 result is
within ~3 * log2(frames) * eps of exact (< 3e-6 for 4096 frames; observed 1.3e-6), so PV_RTOL32 =
1e-5 (the brief's 1e-4 holds with margin); in float64 the bound is librosa's own float64 drift
(observed 6e-12), PV_RTOL64 = 1e-10.

time_stretch in float32 also carries the float32 STFT's error: bins ~1e-6 below a frame's peak
have noise-level phases, and a vocoded bin keeps every earlier phase difference, so the output
is within ~3.5e-4 of float64 (librosa's own float32 run: 1e-3 to 4e-3); TS_RTOL32 = 1e-3.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, speech, up, up32

librosa = pytest.importorskip("librosa")

PV_RTOL32 = 1e-5
PV_RTOL64 = 1e-10
TS_RTOL32 = 1e-3
TS_RTOL64 = 1e-10
_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"

RATES = [0.5, 0.73, 1.0, 1.7, 2.0, 3.3]


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_phase_vocoder_tones(rate: float, dtype: type) -> None:
    y = SYNTH["tones"](16000, 1.0, np.random.default_rng(11))
    D = librosa.stft(y, n_fft=512, hop_length=128).astype(dtype)
    ref = librosa.phase_vocoder(D.astype(np.complex128), rate=rate, hop_length=128)
    out = pa.phase_vocoder(up(D), rate=rate, hop_length=128)
    assert out.dtype.name == np.dtype(dtype).name
    tol = PV_RTOL32 if dtype == np.complex64 else PV_RTOL64
    assert rel_err(out, ref) <= tol


def test_phase_vocoder_speech_and_defaults() -> None:
    y, _ = speech("fox_22k")
    D = librosa.stft(y.astype(np.float32))  # n_fft 2048, hop 512: hop_length default n_fft // 4
    ref = librosa.phase_vocoder(D.astype(np.complex128), rate=0.8)
    assert rel_err(pa.phase_vocoder(up(D), rate=0.8), ref) <= PV_RTOL32


def test_phase_vocoder_batched_rows_and_strided_input() -> None:
    rng = np.random.default_rng(12)
    ys = np.stack([SYNTH[k](8000, 0.6, rng) for k in ("chirp", "clicks", "tones")])
    D = librosa.stft(ys, n_fft=256, hop_length=64).reshape(3, 1, 129, -1)  # [3, 1, F, T]
    out = pa.phase_vocoder(up(D), rate=1.37, hop_length=64).to_numpy()
    ref = librosa.phase_vocoder(D.astype(np.complex128), rate=1.37, hop_length=64)
    assert out.shape == ref.shape
    assert rel_err(out, ref) <= PV_RTOL32
    for i in range(3):
        row = pa.phase_vocoder(up(D[i, 0]), rate=1.37, hop_length=64).to_numpy()
        np.testing.assert_array_equal(out[i, 0], row)
    # The frame-major view stft returns (frame axis last over [frames, F] storage).
    Dg = pa.stft(up32(ys[0]), n_fft=256, hop_length=64)
    ref = librosa.phase_vocoder(Dg.to_numpy().astype(np.complex128), rate=0.6)
    assert rel_err(pa.phase_vocoder(Dg, rate=0.6), ref) <= PV_RTOL32


def test_phase_vocoder_zero_bins_follow_np_angle() -> None:
    # Exact zeros, with -0.0 real parts (np.angle = pi) and +0.0 (angle 0), then signal.
    rng = np.random.default_rng(13)
    D = (rng.standard_normal((9, 12)) + 1j * rng.standard_normal((9, 12))).astype(np.complex128)
    D[:, :3] = 0.0
    D[2:5, 0] = complex(-0.0, 0.0)
    D[6, 1] = complex(-0.0, -0.0)
    D[1, 4] = 1e-300 * (1 + 1j)  # the scaled modulus keeps tiny values' phase
    D[3, 5] = -D[3, 5]  # a sign flip there would show as a 2|D| error downstream
    for rate in (0.5, 1.0, 2.5, 20.0):  # 20: one all-zero output frame
        ref = librosa.phase_vocoder(D, rate=rate)
        out = pa.phase_vocoder(up(D), rate=rate)
        np.testing.assert_allclose(out.to_numpy(), ref, rtol=0, atol=1e-12)


CASES: list[tuple[float, dict[str, Any]]] = [
    (0.5, {}),
    (1.3, {"n_fft": 512, "hop_length": 128}),
    (2.0, {"n_fft": 512, "win_length": 256}),
    (0.8, {"n_fft": 400, "hop_length": 100, "window": "hamming", "center": False}),
]


@pytest.mark.parametrize(("rate", "kw"), CASES)
@pytest.mark.parametrize("kind", ["tones", "chirp", "speech"])
def test_time_stretch_matches_librosa(kind: str, rate: float, kw: dict[str, Any]) -> None:
    if kind == "speech":
        y, sr = speech("hello_16k")
    else:
        sr = 16000
        y = SYNTH[kind](sr, 1.0, np.random.default_rng(14))
    ref = librosa.effects.time_stretch(y, rate=rate, **kw)
    assert ref.shape == (round(y.size / rate),)
    out64 = pa.effects.time_stretch(up(y), rate=rate, **kw)
    assert out64.shape == ref.shape and out64.dtype.name == "float64"
    assert rel_err(out64, ref) <= TS_RTOL64
    out32 = pa.effects.time_stretch(up32(y), rate=rate, **kw)
    assert out32.dtype.name == "float32"
    assert rel_err(out32, ref) <= TS_RTOL32
    # The stretched spectrum: magnitudes of both outputs through the same float64 STFT.
    mag = np.abs(librosa.stft(out32.to_numpy().astype(np.float64), n_fft=512))
    assert rel_err(mag, np.abs(librosa.stft(ref, n_fft=512))) <= TS_RTOL32


def test_time_stretch_batched_rows() -> None:
    rng = np.random.default_rng(15)
    ys = np.stack([SYNTH["clicks"](8000, 0.5, rng), SYNTH["chirp"](8000, 0.5, rng)])
    out = pa.effects.time_stretch(up32(ys), rate=1.5, n_fft=256).to_numpy()
    assert out.shape == (2, 2667)
    for i in range(2):
        row = pa.effects.time_stretch(up32(ys[i]), rate=1.5, n_fft=256).to_numpy()
        np.testing.assert_array_equal(out[i], row)
    ref = librosa.effects.time_stretch(ys, rate=1.5, n_fft=256)
    assert rel_err(out, ref) <= TS_RTOL32


_D = (np.ones((129, 20)) * (1 + 1j)).astype(np.complex64)
_Y = np.random.default_rng(0).standard_normal(4000).astype(np.float32)
BAD = [
    ("rate 0", lambda: pa.phase_vocoder(up(_D), rate=0), ValueError, "rate"),
    ("rate str", lambda: pa.phase_vocoder(up(_D), rate="2"), TypeError, "rate"),
    ("real D", lambda: pa.phase_vocoder(up32(np.abs(_D)), rate=2), TypeError, "D must be"),
    ("n_fft", lambda: pa.phase_vocoder(up(_D), rate=2, n_fft=512), ValueError, "n_fft=512"),
    ("hop", lambda: pa.phase_vocoder(up(_D), rate=2, hop_length=0), ValueError, "hop_length"),
    ("no frames", lambda: pa.phase_vocoder(up(_D[:, :0]), rate=2), ValueError, "no frames"),
    ("ts rate", lambda: pa.effects.time_stretch(up32(_Y), rate=-1), ValueError, "rate"),
    ("ts len", lambda: pa.effects.time_stretch(up32(_Y), rate=1e5), ValueError, "0 samples"),
    (
        "ts pad_mode",
        lambda: pa.effects.time_stretch(up32(_Y), rate=2, pad_mode="reflect"),
        TypeError,
        "pad_mode",
    ),
    (
        "ts n_fft",
        lambda: pa.effects.time_stretch(up32(_Y), rate=2, n_fft=8192, center=False),
        ValueError,
        "n_fft=8192",
    ),
    ("ts int y", lambda: pa.effects.time_stretch(np.arange(99), rate=2), TypeError, "y must"),
]


@pytest.mark.parametrize(("what", "call", "exc", "match"), BAD, ids=[c[0] for c in BAD])
def test_vocoder_bad_input_raises_before_any_op(
    what: str, call: Any, exc: type, match: str
) -> None:
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=match):
        call()
