"""resample (polyphase) against librosa.resample(res_type='polyphase') (= scipy's
resample_poly) in float64: a linear map, so relative norm error <= 1e-5 in float32."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, speech, up32

librosa = pytest.importorskip("librosa")
pytest.importorskip("scipy")

RTOL = 1e-5
RATES = [
    (22050, 16000),
    (16000, 22050),
    (16000, 48000),
    (44100, 16000),
    (16000, 8000),
    (8000, 8001),
]


@pytest.mark.parametrize(("orig", "target"), RATES)
@pytest.mark.parametrize("n", [1, 7, 4097])
def test_resample_matches_librosa(orig: int, target: int, n: int) -> None:
    rng = np.random.default_rng(n)
    y = rng.standard_normal((2, n))
    ref = librosa.resample(y, orig_sr=orig, target_sr=target, res_type="polyphase")
    out = pa.resample(up32(y), orig_sr=orig, target_sr=target)
    assert out.shape == ref.shape
    assert rel_err(out, ref) <= RTOL


@pytest.mark.parametrize(("fix", "scale"), [(False, True), (True, True)])
def test_resample_fix_scale_speech(fix: bool, scale: bool) -> None:
    y, sr = speech("fox_22k")
    ref = librosa.resample(
        y, orig_sr=sr, target_sr=16000, res_type="polyphase", fix=fix, scale=scale
    )
    out = pa.resample(up32(y), orig_sr=sr, target_sr=16000, fix=fix, scale=scale)
    assert rel_err(out, ref) <= RTOL


def test_same_rate_is_identity() -> None:
    x = up32(SYNTH["tones"](8000, 0.1, np.random.default_rng(0)))
    assert pa.resample(x, orig_sr=8000, target_sr=8000) is x
