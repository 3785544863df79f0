"""The audio functions on a CUDA device against the same calls on the CPU device (the NumPy
backend, which the other files here hold to librosa), so the GPU routes are checked on hosts
without librosa: float64 to 1e-10 (relative norm; pitch tracks to 1e-9 a frame, the same voiced
frames), float32 to docs/design.md's fp32 bound 1e-5 where one transform separates the two
(looser where iterations or dB floors amplify the FFTs' roundings: the tolerances say why;
pitch to 1e-4, 0.17 cents, with at most two frames at the voicing edges flipped). Marker gpu:
skipped without a CUDA device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH

pytestmark = pytest.mark.gpu
GPU = "cuda:0"
SR = 22050


def _signal(kind: str, dtype: str, seconds: float = 1.5) -> np.ndarray:
    y = SYNTH[kind](SR, seconds, np.random.default_rng(7))
    return np.asarray(y, dtype=dtype)


def _host(x: Any) -> np.ndarray:
    return x.to_numpy() if isinstance(x, gp.GPUArray) else np.asarray(x)


def _both(fn: Callable[[str], Any]) -> tuple[Any, Any]:
    return fn(GPU), fn("cpu")


def _close(got: Any, ref: Any, dtype: str, tol32: float = 1e-5) -> None:
    g, r = _host(got), _host(ref)
    assert g.shape == r.shape and g.dtype == r.dtype
    tol = 1e-10 if dtype == "float64" else tol32
    err = float(np.linalg.norm((g - r).ravel())) / max(float(np.linalg.norm(r.ravel())), 1e-300)
    assert err <= tol, f"relative error {err:.3e} > {tol:g}"


def _up(y: np.ndarray, device: str) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(y), device=device)


# name: (call, float32 tolerance). The linear transforms keep design.md's 1e-5; the dB-based
# features difference log values near the 80 dB floor, where the two backends' FFT roundings
# (1e-7 to 3e-7 relative) move the result by up to about 2e-5 (onset_strength) and 3e-6 (mfcc).
SPECTRAL: dict[str, tuple[Callable[[gp.GPUArray], Any], float]] = {
    "stft 2048/512": (lambda y: pa.stft(y, n_fft=2048, hop_length=512), 1e-5),
    "stft 400/160 reflect": (
        lambda y: pa.stft(y, n_fft=400, hop_length=160, pad_mode="reflect"),
        1e-5,
    ),
    "melspectrogram": (lambda y: pa.feature.melspectrogram(y=y, sr=SR, n_mels=64), 1e-5),
    "mfcc": (lambda y: pa.feature.mfcc(y=y, sr=SR, n_mfcc=13), 3e-5),
    "onset_strength": (lambda y: pa.onset.onset_strength(y=y, sr=SR), 1e-4),
    "resample 22050 -> 16000": (lambda y: pa.resample(y, orig_sr=SR, target_sr=16000), 1e-5),
    "istft of stft": (
        lambda y: pa.istft(pa.stft(y, n_fft=1024, hop_length=256), hop_length=256),
        1e-5,
    ),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(SPECTRAL))
def test_spectral_functions(name: str, dtype: str) -> None:
    y = _signal("chirp", dtype)
    fn, tol32 = SPECTRAL[name]
    got, ref = _both(lambda dev: fn(_up(y, dev)))
    _close(got, ref, dtype, tol32)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fn", ["cqt", "vqt"])
def test_constant_q(fn: str, dtype: str) -> None:
    pytest.importorskip("scipy")  # the filter basis is built with scipy.fft, as librosa does
    y = _signal("tones", dtype)
    kw: dict[str, Any] = {"sr": SR, "n_bins": 60, "fmin": 65.0}
    if fn == "vqt":
        kw["gamma"] = 5.0
    got, ref = _both(lambda dev: getattr(pa, fn)(_up(y, dev), **kw))
    _close(got, ref, dtype)


def _tone(dtype: str) -> np.ndarray:
    """220 Hz, a quiet gap, then 440 Hz: voiced and unvoiced frames."""
    t = np.arange(int(0.6 * SR)) / SR
    y = np.concatenate(
        [0.5 * np.sin(2 * np.pi * 220 * t), np.zeros(SR // 5), 0.4 * np.sin(2 * np.pi * 440 * t)]
    )
    return y.astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_yin(dtype: str) -> None:
    y = _tone(dtype)
    got, ref = _both(lambda dev: pa.yin(_up(y, dev), fmin=65.4, fmax=2093.0, sr=SR))
    g, r = _host(got), _host(ref)
    np.testing.assert_allclose(g, r, rtol=1e-9 if dtype == "float64" else 1e-4)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pyin(dtype: str) -> None:
    y = _tone(dtype)
    got, ref = _both(lambda dev: pa.pyin(_up(y, dev), fmin=65.4, fmax=2093.0, sr=SR))
    f0g, vg, pg = (_host(a) for a in got)
    f0r, vr, pr = (_host(a) for a in ref)
    assert vr.any() and not vr.all()
    if dtype == "float64":
        np.testing.assert_array_equal(vg, vr)  # the same voiced frames
        np.testing.assert_allclose(f0g, f0r, rtol=1e-9, equal_nan=True)
        np.testing.assert_allclose(pg, pr, rtol=1e-9, atol=1e-12)
    else:  # float32 roundings may flip a frame at the voicing edges, nowhere else
        assert int((vg != vr).sum()) <= 2
        both = vg & vr
        np.testing.assert_allclose(f0g[both], f0r[both], rtol=1e-4)
        np.testing.assert_allclose(pg, pr, atol=1e-3)


def _clicks_stft(dtype: str) -> np.ndarray:
    y = _signal("clicks", dtype)
    cdt = "complex128" if dtype == "float64" else "complex64"
    return pa.stft(_up(y, "cpu"), n_fft=1024, hop_length=256).to_numpy().astype(cdt)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_hpss_and_phase_vocoder(dtype: str) -> None:
    d = _clicks_stft(dtype)
    got, ref = _both(lambda dev: pa.hpss(_up(np.abs(d), dev), kernel_size=17))
    _close(got[0], ref[0], dtype)
    _close(got[1], ref[1], dtype)
    got, ref = _both(lambda dev: pa.phase_vocoder(_up(d, dev), rate=1.3, hop_length=256))
    _close(got, ref, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_griffinlim(dtype: str) -> None:
    # From zero phase with momentum 0.99 the iteration amplifies the FFT's rounding: two float32
    # FFTs 1e-7 to 3e-7 apart end 6e-5 to 2.4e-4 apart after 8 iterations (a model on the CPU).
    mag = np.abs(_clicks_stft(dtype))
    got, ref = _both(lambda dev: pa.griffinlim(_up(mag, dev), n_iter=8, hop_length=256, init=None))
    _close(got, ref, dtype, tol32=2e-3)
