"""griffinlim against librosa in float64.

Bound: 32 iterations of istft/stft/projection in float32 drift from the float64 iterates; the
drift stays near librosa's own float32 run (4e-5 relative on this chirp), so the bound is 2e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, up32

librosa = pytest.importorskip("librosa")

RTOL = 2e-4


@pytest.mark.parametrize(("init", "seed"), [(None, None), ("random", 3)])
def test_griffinlim_matches_librosa(init: str | None, seed: int | None) -> None:
    y = SYNTH["chirp"](16000, 0.5, np.random.default_rng(0))
    s = np.abs(librosa.stft(y, n_fft=512, hop_length=128, dtype=np.complex128))
    s = s.astype(np.float32).astype(np.float64)
    ref = librosa.griffinlim(s, n_fft=512, hop_length=128, init=init, random_state=seed)
    out = pa.griffinlim(up32(s), n_fft=512, hop_length=128, init=init, random_state=seed)
    assert rel_err(out, ref) <= RTOL


def test_griffinlim_batched_rows_and_length() -> None:
    rng = np.random.default_rng(1)
    # 2400 samples each. Not the steady tones: from zero phase their first projection divides
    # by bins that cancel to ~0, so any float32 run (librosa's too: 0.17) leaves float64's path.
    ys = np.stack([SYNTH["chirp"](8000, 0.3, rng), SYNTH["clicks"](8000, 0.3, rng)])
    s = np.abs(librosa.stft(ys, n_fft=256, dtype=np.complex128))
    out = pa.griffinlim(up32(s), n_iter=5, init=None, length=2390).to_numpy()
    assert out.shape == (2, 2390)
    for i in range(2):
        row = pa.griffinlim(up32(s[i]), n_iter=5, init=None, length=2390).to_numpy()
        np.testing.assert_array_equal(out[i], row)
    ref = librosa.griffinlim(s, n_iter=5, init=None, length=2390)
    assert rel_err(out, ref) <= RTOL


def test_griffinlim_length_must_keep_frames() -> None:
    s = np.ones((129, 38), np.float32)
    with pytest.raises(ValueError, match="length=2000 gives 32 frames"):
        pa.griffinlim(up32(s), length=2000)
