"""Spectrogram decompositions in librosa's names (librosa.decompose): hpss.

Median-filtering harmonic/percussive source separation (Fitzgerald 2010; margins: Driedger,
Mueller and Disch 2014), as librosa.decompose.hpss computes it:

    harm = median over kernel_size[0] frames  (gp.median_filter, axis -1)
    perc = median over kernel_size[1] bins    (gp.median_filter, axis -2)
    mask_H = softmask(harm, margin[0] * perc, power)
    mask_P = softmask(perc, margin[1] * harm, power)
    H = S * mask_H * phase,  P = S * mask_P * phase

with librosa.util.softmask's rescaling: Z = max(X, X_ref), where Z < finfo.tiny the mask is 0.5
when both margins are 1 (the energy split evenly) and 0 otherwise, else
(X / Z) ** power / ((X / Z) ** power + (X_ref / Z) ** power); power = inf gives the hard mask
X > X_ref (bool). Everything runs as routed ops (median_filter, elementwise, magphase's views), so
the same code serves the GPU and the CPU.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray, view_as_complex, view_as_real
from pygpukit.audio.spectrum import magphase
from pygpukit.creation import from_numpy
from pygpukit.ops.median import check_size

__all__ = ["hpss"]

_REAL = ("float32", "float64")
_COMPLEX = ("complex64", "complex128")


class HpssArgs:
    """hpss's checked parameters: window sizes, margins and the mask power."""

    __slots__ = ("margin_harm", "margin_perc", "power", "win_harm", "win_perc")

    def __init__(self, fn: str, kernel_size: Any, power: Any, mask: Any, margin: Any) -> None:
        win = _pair(fn, "kernel_size", kernel_size)
        self.win_harm = check_size(fn, _item_name("kernel_size", kernel_size, 0), win[0])
        self.win_perc = check_size(fn, _item_name("kernel_size", kernel_size, 1), win[1])
        marg = _pair(fn, "margin", margin)
        self.margin_harm = _margin(fn, _item_name("margin", margin, 0), marg[0])
        self.margin_perc = _margin(fn, _item_name("margin", margin, 1), marg[1])
        self.power = _power(fn, power)
        if not isinstance(mask, (bool, np.bool_)):
            raise TypeError(f"{fn}: mask must be a bool, got {type(mask).__name__}")


def _pair(fn: str, name: str, value: Any) -> tuple[Any, Any]:
    """(v, v) for a scalar, the two items of a tuple or list (librosa's rule for kernel_size and
    margin)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(
                f"{fn}: {name} must be a scalar or a (harmonic, percussive) pair, got {value!r}"
            )
        return value[0], value[1]
    return value, value


def _item_name(name: str, value: Any, i: int) -> str:
    return f"{name}[{i}]" if isinstance(value, (tuple, list)) else name


def _margin(fn: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and v >= 1.0):
        raise ValueError(
            f"{fn}: {name} must be a finite number >= 1.0 (a typical range is 1 to 10), "
            f"got {value!r}"
        )
    return v


def _power(fn: str, value: Any) -> float:
    """A number > 0; inf is allowed (the hard mask)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: power must be a number, got {type(value).__name__}")
    v = float(value)
    if not v > 0:
        raise ValueError(f"{fn}: power must be > 0 (or inf for a hard mask), got {value!r}")
    return v


def spectrogram(fn: str, name: str, S: Any) -> GPUArray:
    """S as a float32/float64 or complex64/complex128 GPUArray [..., d, n] (NumPy is uploaded
    to the default device)."""
    if isinstance(S, np.ndarray):
        if S.dtype.name not in _REAL + _COMPLEX:
            raise TypeError(
                f"{fn}: {name} must be a float32/float64 magnitude or a complex64/complex128 "
                f"spectrogram, got NumPy dtype {S.dtype}"
            )
        S = from_numpy(np.ascontiguousarray(S))
    if not isinstance(S, GPUArray):
        raise TypeError(f"{fn}: {name} must be a GPUArray or a NumPy array, got {type(S).__name__}")
    if S.dtype.name not in _REAL + _COMPLEX:
        raise TypeError(
            f"{fn}: {name} must be a float32/float64 magnitude or a complex64/complex128 "
            f"spectrogram, got dtype {S.dtype.name}"
        )
    if S.ndim < 2:
        raise ValueError(
            f"{fn}: {name} must have at least 2 dims ([..., d, n]), got shape {S.shape}"
        )
    return S


def _softmask(x: GPUArray, x_ref: GPUArray, power: float, split_zeros: bool) -> GPUArray:
    """librosa.util.softmask(x, x_ref, power=power, split_zeros=split_zeros) for non-negative
    float x and x_ref. Powers 1 and 2 are a copy and a product, as NumPy's power computes them."""
    if math.isinf(power):
        return ops.gt(x, x_ref)
    z = ops.maximum(x, x_ref)
    bad = z < float(np.finfo(x.dtype.np_dtype).tiny)
    z = ops.where(bad, 1.0, z)
    m, m_ref = x / z, x_ref / z
    if power == 2.0:
        m, m_ref = m * m, m_ref * m_ref
    elif power != 1.0:
        m, m_ref = ops.pow(m, power), ops.pow(m_ref, power)
    return ops.where(bad, 0.5 if split_zeros else 0.0, m / (m + m_ref))


def separate(
    S: GPUArray, a: HpssArgs, mask: bool, want: tuple[bool, bool]
) -> tuple[GPUArray | None, GPUArray | None]:
    """(harmonic, percussive) of a checked S, each None unless asked for in ``want``."""
    phase: GPUArray | None = None
    if S.dtype.name in _COMPLEX:
        mag, phase = magphase(S)
    else:
        mag = S
    harm = ops.median_filter(mag, a.win_harm, axis=-1)
    perc = ops.median_filter(mag, a.win_perc, axis=-2)
    split_zeros = a.margin_harm == 1.0 and a.margin_perc == 1.0
    res: list[GPUArray | None] = []
    for wanted, x, x_ref, margin in (
        (want[0], harm, perc, a.margin_harm),
        (want[1], perc, harm, a.margin_perc),
    ):
        if not wanted:
            res.append(None)
            continue
        m = _softmask(x, x_ref if margin == 1.0 else x_ref * margin, a.power, split_zeros)
        if mask:
            res.append(m)
        elif phase is None:
            res.append(mag * m)
        else:
            part = view_as_real(phase) * (mag * m).unsqueeze(-1)
            res.append(view_as_complex(part))
    return res[0], res[1]


def hpss(
    S: Any,
    *,
    kernel_size: Any = 31,
    power: float = 2.0,
    mask: bool = False,
    margin: Any = 1.0,
) -> tuple[GPUArray, GPUArray]:
    """librosa.decompose.hpss: (harmonic, percussive) parts of a spectrogram S [..., d, n],
    a magnitude (float32/float64) or a complex STFT (complex64/complex128, whose phase the parts
    keep), or with ``mask=True`` the soft masks (bool hard masks for power=inf).

    kernel_size: the harmonic (frames, axis -1) and percussive (bins, axis -2) median window
    sizes, one int for both or a (harmonic, percussive) pair; margin likewise (>= 1; above 1 a
    residual S - H - P remains). See the module docstring for the math.

    Deviations: kernel sizes must be odd and at most 255 (gp.median_filter's window; librosa's
    examples use 31 and 17, and scipy takes an even size as the upper median of a window shifted
    by half a sample); a real S with negative values is not rejected (librosa's softmask raises
    on them; that check would read the data back to the host), the masks are then meaningless.
    Where a window is many times longer than its axis (a few frames, kernel_size 31) the axis
    reflects repeatedly here, while scipy 1.17's rank filter under librosa reads past the array
    (see gp.median_filter).
    """
    fn = "hpss"
    x = spectrogram(fn, "S", S)
    a = HpssArgs(fn, kernel_size, power, mask, margin)
    h, p = separate(x, a, bool(mask), (True, True))
    assert h is not None and p is not None
    return h, p
