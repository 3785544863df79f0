"""Filter design (windows, mel bank, window sum-square, DCT) and unit conversions against
scipy and librosa in float64."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import up32

librosa = pytest.importorskip("librosa")
signal = pytest.importorskip("scipy.signal")
scipy_fft = pytest.importorskip("scipy.fft")

WINDOWS = ["hann", "hamming", "blackman", "boxcar", "bartlett", "triang", ("kaiser", 5.0)]


@pytest.mark.parametrize("window", WINDOWS, ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 400, 2048])
@pytest.mark.parametrize("fftbins", [True, False])
def test_get_window_matches_scipy(window: object, n: int, fftbins: bool) -> None:
    out = pa.get_window(window, n, fftbins=fftbins, device=DEVICE)
    assert out.dtype is gp.float64
    assert_close(out, signal.get_window(window, n, fftbins=fftbins), rtol=1e-13)


def test_window_aliases_callable_and_array() -> None:
    ref = signal.get_window("hann", 64)
    assert_close(pa.get_window("han", 64, device=DEVICE), ref, rtol=1e-13)
    assert_close(pa.get_window(np.hanning, 64, device=DEVICE), np.hanning(64), rtol=1e-13)
    assert_close(pa.get_window(ref, 64, device=DEVICE), ref, rtol=0)


MEL_CASES = [
    {"sr": 22050, "n_fft": 2048},
    {"sr": 16000, "n_fft": 400, "n_mels": 80, "fmax": 8000.0},
    {"sr": 16000, "n_fft": 400, "n_mels": 128},
    {"sr": 22050, "n_fft": 1024, "n_mels": 40, "fmin": 100.0, "fmax": 7000.0, "htk": True},
    {"sr": 8000, "n_fft": 512, "n_mels": 32, "norm": None},
    {"sr": 8000, "n_fft": 512, "n_mels": 32, "norm": 2.0},
    {"sr": 8000, "n_fft": 512, "n_mels": 32, "norm": np.inf, "htk": True},
]


@pytest.mark.parametrize("kw", MEL_CASES, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_mel_filters_match_librosa(kw: dict) -> None:
    ref = librosa.filters.mel(dtype=np.float64, **kw)
    out64 = pa.filters.mel(dtype=np.float64, device=DEVICE, **kw)
    assert_close(out64, ref, rtol=1e-12)
    out = pa.mel_filters(device=DEVICE, **kw)
    assert out.dtype is gp.float32 and out.shape == ref.shape
    assert_close(out, ref, rtol=1e-6)  # one float32 rounding


def test_empty_mel_filters_warn_like_librosa() -> None:
    with pytest.warns(UserWarning, match="Empty filters"):
        pa.filters.mel(sr=8000, n_fft=64, n_mels=128, device=DEVICE)


@pytest.mark.parametrize("kw", [{}, {"htk": True}])
def test_mel_frequencies_and_conversions(kw: dict) -> None:
    ref = librosa.mel_frequencies(n_mels=40, fmin=30.0, fmax=9000.0, **kw)
    out = pa.mel_frequencies(40, fmin=30.0, fmax=9000.0, device=DEVICE, **kw)
    assert_close(out, ref, rtol=1e-13)
    hz = np.concatenate([np.linspace(0, 11025, 997), [1000.0]])
    assert np.allclose(pa.hz_to_mel(hz, **kw), librosa.hz_to_mel(hz, **kw), rtol=1e-15)
    assert pa.hz_to_mel(1500.0, **kw) == librosa.hz_to_mel(1500.0, **kw)
    mels = librosa.hz_to_mel(hz, **kw)
    assert np.allclose(pa.mel_to_hz(mels, **kw), librosa.mel_to_hz(mels, **kw), rtol=1e-15)
    # GPUArray in, GPUArray out (float32 routed ops: one relative rounding per op, a few ops).
    assert_close(pa.hz_to_mel(up32(hz), **kw), mels, rtol=1e-6)
    assert_close(pa.mel_to_hz(up32(mels), **kw), hz, rtol=1e-6)


def test_fft_frequencies() -> None:
    ref = librosa.fft_frequencies(sr=16000, n_fft=400)
    assert_close(pa.fft_frequencies(sr=16000, n_fft=400, device=DEVICE), ref, rtol=1e-15)


@pytest.mark.parametrize(
    ("n_frames", "hop", "win", "n_fft"), [(37, 160, 400, 512), (5, 512, 2048, 2048), (9, 7, 20, 20)]
)
def test_window_sumsquare(n_frames: int, hop: int, win: int, n_fft: int) -> None:
    ref = librosa.filters.window_sumsquare(
        window="hann",
        n_frames=n_frames,
        hop_length=hop,
        win_length=win,
        n_fft=n_fft,
        dtype=np.float64,
    )
    out = pa.filters.window_sumsquare(
        window="hann",
        n_frames=n_frames,
        hop_length=hop,
        win_length=win,
        n_fft=n_fft,
        dtype=np.float64,
        device=DEVICE,
    )
    assert_close(out, ref, rtol=1e-13)


@pytest.mark.parametrize("dct_type", [2, 3])
@pytest.mark.parametrize("norm", ["ortho", None])
def test_dct_matrix_matches_scipy(dct_type: int, norm: str | None) -> None:
    x = np.random.default_rng(0).standard_normal((40, 6))
    d = pa.filters.dct(13, 40, dct_type=dct_type, norm=norm, dtype=np.float64, device=DEVICE)
    ref = scipy_fft.dct(x, type=dct_type, norm=norm, axis=0)[:13]
    assert_close(d.to_numpy() @ x, ref, rtol=1e-12)
