"""onset_strength / onset_detect / onset_backtrack against librosa (float64 input).

Envelope bound: each band of the log-mel spectrogram is within MEL_DB_ATOL = 2e-3 dB of
librosa's float64 value (test_feature.py: a quiet band's float32 error is relative to the
frame's energy, up to ~1e-4 relative near the 80 dB floor). The flux max(0, S[t] - ref[t - lag])
is 1-Lipschitz in each of its two dB inputs, and every aggregate (mean, max, min; sum divided by
the band count) keeps the bound, so the envelope is within 2 * MEL_DB_ATOL (sum: times the band
count); detrend's filter (1 - z^-1) / (1 - 0.99 z^-1) has an l1 gain of 2, doubling it again.
Observed: 5e-5 dB at most. Onset frames must be identical (peaks, waits and the delta rule on
the same envelope up to those errors).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SPEECH, SYNTH, speech, up, up32

librosa = pytest.importorskip("librosa")
scipy_ndimage = pytest.importorskip("scipy.ndimage")

MEL_DB_ATOL = 2e-3
ENV_ATOL = 2 * MEL_DB_ATOL
_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"

STRENGTH_CASES: list[dict[str, Any]] = [
    {},
    {"lag": 2, "max_size": 3},
    {"detrend": True},
    {"center": False, "aggregate": np.max},
    {"max_size": 4, "n_fft": 1024, "hop_length": 256, "n_mels": 64, "fmax": 6000.0},
]


def _ids(kw: dict[str, Any]) -> str:
    return "-".join(f"{k}{getattr(v, '__name__', v)}" for k, v in kw.items()) or "defaults"


def _env_atol(kw: dict[str, Any]) -> float:
    return ENV_ATOL * (2 if kw.get("detrend") else 1)


@pytest.mark.parametrize("kw", STRENGTH_CASES, ids=_ids)
@pytest.mark.parametrize("kind", ["clicks", "chirp", "speech"])
def test_onset_strength_matches_librosa(kind: str, kw: dict[str, Any]) -> None:
    if kind == "speech":
        y, sr = speech("fox_22k")
    else:
        sr = 22050
        y = SYNTH[kind](sr, 1.5, np.random.default_rng(4))
    ref = librosa.onset.onset_strength(y=y, sr=sr, **kw)
    out = pa.onset.onset_strength(y=up32(y), sr=sr, **kw).to_numpy()
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, rtol=0, atol=_env_atol(kw))


def test_onset_strength_from_s_and_ref_float64() -> None:
    rng = np.random.default_rng(7)
    s = rng.standard_normal((2, 37, 53)) * 10.0  # any float64 "spectrogram", odd sizes
    for size in (1, 2, 5, 37, 40):
        ref = librosa.onset.onset_strength(S=s, max_size=size, lag=3, aggregate=np.sum)
        out = pa.onset.onset_strength(S=up(s), max_size=size, lag=3, aggregate=np.sum)
        np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-12, atol=1e-12)
    given = scipy_ndimage.maximum_filter1d(s, 3, axis=-2) - 1.0
    ref = librosa.onset.onset_strength(S=s, ref=given, detrend=True, aggregate=np.min)
    out = pa.onset.onset_strength(S=up(s), ref=up(given), detrend=True, aggregate=np.min)
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-10, atol=1e-10)


def test_onset_strength_short_s_and_large_lag() -> None:
    s = np.random.default_rng(2).standard_normal((8, 4))
    for center in (True, False):
        ref = librosa.onset.onset_strength(S=s, lag=5, center=center)
        out = pa.onset.onset_strength(S=up(s), lag=5, center=center).to_numpy()
        np.testing.assert_array_equal(out, ref)


def test_onset_strength_batched_rows() -> None:
    rng = np.random.default_rng(5)
    # Similar levels: power_to_db's whole-array 80 dB floor binds the same way batched or not.
    ys = np.stack([SYNTH["clicks"](16000, 1.0, rng), SYNTH["chirp"](16000, 1.0, rng)])
    out = pa.onset.onset_strength(y=up32(ys), sr=16000, max_size=3).to_numpy()
    for i in range(2):
        row = pa.onset.onset_strength(y=up32(ys[i]), sr=16000, max_size=3).to_numpy()
        np.testing.assert_array_equal(out[i], row)
    ref = librosa.onset.onset_strength(y=ys, sr=16000, max_size=3)
    np.testing.assert_allclose(out, ref, rtol=0, atol=ENV_ATOL)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_onset_detect_clicks_same_frames(seed: int) -> None:
    y = SYNTH["clicks"](22050, 2.0, np.random.default_rng(seed))
    ref = librosa.onset.onset_detect(y=y, sr=22050)
    out = pa.onset.onset_detect(y=up32(y), sr=22050)
    assert ref.size >= 4
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name", sorted(SPEECH))
def test_onset_detect_speech_same_frames(name: str) -> None:
    y, sr = speech(name)
    for kw in ({}, {"units": "time", "backtrack": True}, {"units": "samples", "hop_length": 256}):
        ref = librosa.onset.onset_detect(y=y, sr=sr, **kw)
        out = pa.onset.onset_detect(y=up32(y), sr=sr, **kw)
        assert ref.size >= 3
        assert out.dtype.kind == ref.dtype.kind
        np.testing.assert_array_equal(out, ref)


def test_onset_detect_dense_batch_and_envelope_kwargs() -> None:
    rng = np.random.default_rng(8)
    ys = np.stack([SYNTH["clicks"](16000, 1.5, rng) for _ in range(3)])
    ref = librosa.onset.onset_detect(y=ys, sr=16000, sparse=False)
    out = pa.onset.onset_detect(y=up32(ys), sr=16000, sparse=False)
    assert out.dtype == bool and ref.any()
    np.testing.assert_array_equal(out, ref)
    env = librosa.onset.onset_strength(y=ys[0], sr=16000)
    peak_kw = {"pre_max": 2, "post_max": 2.5, "pre_avg": 0, "post_avg": 1, "wait": 0, "delta": 0.2}
    for normalize in (True, False):
        ref = librosa.onset.onset_detect(
            onset_envelope=env, sr=16000, normalize=normalize, **peak_kw
        )
        out = pa.onset.onset_detect(
            onset_envelope=up(env), sr=16000, normalize=normalize, **peak_kw
        )
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peak_picking_matches_librosa_with_ties(dtype: type) -> None:
    # Quantized random envelopes: plateaus and ties exercise the x[n] == max and wait rules.
    rng = np.random.default_rng(9)
    for _ in range(100):
        env = (np.round(rng.random(300) * 6) / 6).astype(dtype)
        kw = {"pre_max": int(rng.integers(0, 4)), "post_max": 1 + int(rng.integers(0, 4))}
        kw |= {"pre_avg": int(rng.integers(0, 6)), "post_avg": 1 + int(rng.integers(0, 6))}
        kw |= {"wait": int(rng.integers(0, 5)), "delta": float(rng.choice([0.0, 0.05, 0.3]))}
        ref = librosa.onset.onset_detect(onset_envelope=env, normalize=False, **kw)
        out = pa.onset.onset_detect(onset_envelope=up(env), normalize=False, **kw)
        np.testing.assert_array_equal(out, ref)
        if ref.size:  # librosa's match_events refuses an empty event list
            bt = librosa.onset.onset_backtrack(ref, env)
            np.testing.assert_array_equal(pa.onset.onset_backtrack(out, up(env)), bt)


def test_onset_detect_flat_envelope_is_empty() -> None:
    env = np.zeros(50, np.float32)
    assert pa.onset.onset_detect(onset_envelope=up(env)).size == 0
    assert librosa.onset.onset_detect(onset_envelope=env).size == 0


_Y = np.random.default_rng(0).standard_normal(8000).astype(np.float32)
_S = np.random.default_rng(1).standard_normal((16, 30)).astype(np.float32)
BAD = [
    ("lag 0", lambda: pa.onset.onset_strength(y=up32(_Y), lag=0), ValueError, "lag"),
    ("max_size", lambda: pa.onset.onset_strength(S=up32(_S), max_size=0), ValueError, "max_size"),
    ("agg False", lambda: pa.onset.onset_strength(S=up32(_S), aggregate=False), ValueError, "aggr"),
    (
        "agg median",
        lambda: pa.onset.onset_strength(S=up32(_S), aggregate=np.median),
        TypeError,
        "aggregate",
    ),
    (
        "ref shape S",
        lambda: pa.onset.onset_strength(S=up32(_S), ref=up32(_S[:, :5])),
        ValueError,
        "ref has shape",
    ),
    (
        "ref shape y",
        lambda: pa.onset.onset_strength(y=up32(_Y), ref=up32(_S)),
        ValueError,
        "ref has shape",
    ),
    ("detrend", lambda: pa.onset.onset_strength(S=up32(_S), detrend=1), TypeError, "detrend"),
    ("no input", lambda: pa.onset.onset_strength(), ValueError, "pass either y"),
    ("feature", lambda: pa.onset.onset_strength(y=up32(_Y), feature=3), TypeError, "feature"),
    ("mel kw", lambda: pa.onset.onset_strength(y=up32(_Y), n_mels=0), ValueError, "n_mels"),
    ("units", lambda: pa.onset.onset_detect(y=up32(_Y), units="beats"), ValueError, "units"),
    (
        "sparse 2-D",
        lambda: pa.onset.onset_detect(y=up32(np.stack([_Y, _Y]))),
        ValueError,
        "sparse=True",
    ),
    (
        "backtrack dense",
        lambda: pa.onset.onset_detect(y=up32(_Y), backtrack=True, sparse=False),
        ValueError,
        "backtrack",
    ),
    ("post_max", lambda: pa.onset.onset_detect(y=up32(_Y), post_max=0), ValueError, "post_max"),
    ("peak kw", lambda: pa.onset.onset_detect(y=up32(_Y), n_mels=40), TypeError, "n_mels"),
    ("int y", lambda: pa.onset.onset_detect(y=np.arange(9000)), TypeError, "y must be"),
]


@pytest.mark.parametrize(("what", "call", "exc", "match"), BAD, ids=[c[0] for c in BAD])
def test_onset_bad_input_raises_before_any_op(what: str, call: Any, exc: type, match: str) -> None:
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=match):
        call()
