"""Test signals for tests/audio: synthetic chirps, tones and clicks drawn per test, and the
espeak-ng speech fixtures (tests/fixtures/audio/README.md), plus the comparison used against
librosa's float64 results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "audio"
SPEECH = {
    "fox_22k": ("speech_fox_22k.wav", 22050),
    "hello_16k": ("speech_hello_16k.wav", 16000),
    "numbers_16k": ("speech_numbers_16k.wav", 16000),
}


def chirp(sr: int, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A linear chirp from a random start frequency up to ~sr/3, with a little noise."""
    t = np.arange(int(sr * seconds)) / sr
    f0 = rng.uniform(50, 300)
    f1 = sr / 3
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / seconds * t * t)
    return 0.5 * np.sin(phase) + 1e-3 * rng.standard_normal(t.size)


def tones(sr: int, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Three random sinusoids (one near Nyquist) with random phases."""
    t = np.arange(int(sr * seconds)) / sr
    freqs = (rng.uniform(100, 1000), rng.uniform(1000, 4000), 0.45 * sr)
    return sum(
        a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        for a, f in zip((0.4, 0.2, 0.05), freqs, strict=True)
    )


def clicks(sr: int, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Decaying clicks at random times over low noise (onsets, transients)."""
    n = int(sr * seconds)
    y = 1e-3 * rng.standard_normal(n)
    for start in rng.integers(0, n - 200, size=8):
        y[start : start + 200] += np.exp(-np.arange(200) / 30.0) * rng.choice((-0.8, 0.8))
    return y


SYNTH = {"chirp": chirp, "tones": tones, "clicks": clicks}


def speech(name: str) -> tuple[np.ndarray, int]:
    """(float64 samples in [-1, 1), sample rate) of a fixture."""
    sf = pytest.importorskip("soundfile")
    file, sr = SPEECH[name]
    y, rate = sf.read(FIXTURES / file, dtype="float64")
    assert rate == sr
    return y, rate


def up(x: np.ndarray) -> gp.GPUArray:
    """x as it is (float64, complex64 ...) on the test device."""
    return gp.from_numpy(np.ascontiguousarray(x), device=DEVICE)


def up32(x: np.ndarray) -> gp.GPUArray:
    """x as a float32 GPUArray on the test device."""
    return gp.from_numpy(np.ascontiguousarray(x, dtype=np.float32), device=DEVICE)


def rel_err(out: object, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| (complex values compare as complex)."""
    o = out.to_numpy() if isinstance(out, gp.GPUArray) else np.asarray(out)
    assert o.shape == ref.shape, f"shape {o.shape} != reference shape {ref.shape}"
    return float(np.linalg.norm(o - ref) / np.linalg.norm(ref))


def host(x: gp.GPUArray) -> np.ndarray:
    return x.to_numpy()
