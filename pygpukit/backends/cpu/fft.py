"""Discrete Fourier transforms along the last axis (NumPy reference): fft, ifft, rfft, irfft.

numpy.fft's definitions and names (pocketfft underneath). Numerics: the transform always runs in
float64 (complex128), whatever the input's precision; a float64 or complex128 input gives a
complex128 (float64 for irfft) result, every other input (float32, float16, bfloat16,
complex64) is rounded once to complex64 (float32 for irfft). That single rounding is the
reference the fp32 GPU kernels are held to.

Arguments as the op layer (pygpukit/ops/fft.py) passes them: ``n`` the transform length (the
input is zero-padded or truncated to it; for irfft the output length), ``norm`` one of
"backward", "ortho", "forward". irfft ignores the imaginary parts of the DC and (even n)
Nyquist terms, as numpy.fft.irfft does.
"""

from __future__ import annotations

from typing import Literal, cast

import numpy as np

from ._common import Array

Norm = Literal["backward", "ortho", "forward"]

__all__ = ["fft", "ifft", "irfft", "rfft", "rfft_frames", "rfft_windowed"]


def _wide(x: Array) -> tuple[Array, bool]:
    """x in float64/complex128 (exact for every input dtype) and whether the input was double."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128, copy=False), x.dtype == np.complex128
    double = x.dtype == np.float64
    # bfloat16 (ml_dtypes) converts exactly through float32; NumPy floats convert directly.
    src = x if x.dtype.kind == "f" else x.astype(np.float32)
    return src.astype(np.float64, copy=False), double


def _norm(norm: str) -> Norm:
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f"fft: norm must be backward, ortho or forward, got {norm!r}")
    return cast(Norm, norm)


def _complex_result(y: Array, double: bool) -> Array:
    return np.asarray(y, dtype=np.complex128 if double else np.complex64)


def fft(x: Array, *, n: int, norm: str = "backward") -> Array:
    """Forward DFT: X[k] = sum_j x[j] exp(-2 pi i j k / n)."""
    w, double = _wide(x)
    return _complex_result(np.fft.fft(w, n=n, axis=-1, norm=_norm(norm)), double)


def ifft(x: Array, *, n: int, norm: str = "backward") -> Array:
    """Inverse DFT: x[j] = (1/n) sum_k X[k] exp(2 pi i j k / n) (for norm="backward")."""
    w, double = _wide(x)
    return _complex_result(np.fft.ifft(w, n=n, axis=-1, norm=_norm(norm)), double)


def rfft(x: Array, *, n: int, norm: str = "backward") -> Array:
    """DFT of a real signal: the n // 2 + 1 non-negative frequency terms."""
    w, double = _wide(x)
    return _complex_result(np.fft.rfft(w, n=n, axis=-1, norm=_norm(norm)), double)


def rfft_windowed(
    x: Array, window: Array, *, n: int, norm: str = "backward", power: float | None = None
) -> Array:
    """rfft(x * window), or |rfft(x * window)| ** power (power 1 or 2): the product, the
    transform and the power in float64, one rounding at the end."""
    w, double = _wide(x)
    return _windowed(w, window, n, norm, power, double)


def _windowed(
    w: Array, window: Array, n: int, norm: str, power: float | None, double: bool
) -> Array:
    win, _ = _wide(window)
    z = np.fft.rfft(w * win, n=n, axis=-1, norm=_norm(norm))
    if power is None:
        return _complex_result(z, double)
    mag2 = z.real * z.real + z.imag * z.imag
    return np.asarray(np.sqrt(mag2) if power == 1 else mag2, np.float64 if double else np.float32)


def rfft_frames(
    y: Array,
    window: Array,
    *,
    n: int,
    hop: int,
    pad: int,
    pad_mode: str,
    n_frames: int,
    norm: str = "backward",
    power: float | None = None,
) -> Array:
    """rfft_windowed of the first n_frames frames (n = len(window) samples, hop apart) of each row
    of y padded by pad on both sides as np.pad's pad_mode: numpy end to end in float64."""
    w, double = _wide(y)
    yp = np.pad(w, ((0, 0), (pad, pad)), mode=pad_mode) if pad else w  # type: ignore[call-overload]
    n_fft = np.asarray(window).shape[0]
    idx = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]
    return _windowed(yp[:, idx], window, n_fft, norm, power, double)


def irfft(x: Array, *, n: int, norm: str = "backward") -> Array:
    """Inverse of rfft: a real signal of length n from its n // 2 + 1 Hermitian terms."""
    w, double = _wide(x)
    y = np.fft.irfft(w, n=n, axis=-1, norm=_norm(norm))
    return np.asarray(y, dtype=np.float64 if double else np.float32)
