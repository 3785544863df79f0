"""Discrete Fourier transforms with numpy.fft's names and semantics: fft, ifft, rfft, irfft.

Reached as ``gp.fft.fft`` ... (pygpukit/fft.py re-exports them; ``gp.fft`` is the namespace).

- ``n``: the transform length along ``axis``; the input is zero-padded or truncated to it
  (default: the input's length; for irfft the output length, default 2 * (m - 1) for m input
  terms, whose input is padded or truncated to n // 2 + 1 terms).
- ``axis``: any axis (default the last). The backends transform the last axis; another axis is
  moved there as a strided view and the result moved back (one extra copy when ``out`` is not
  given, as the result is returned C-contiguous like NumPy's).
- ``norm``: None or "backward" (1/n on the inverse), "ortho" (1/sqrt(n) both ways), "forward"
  (1/n on the forward transform).
- dtypes: a real input (float32, float16, bfloat16 -> complex64; float64 -> complex128) is
  promoted to complex; complex64/complex128 inputs keep their dtype. rfft takes real input only,
  irfft complex input only (its result is float32 / float64).
- ``out``: an optional result buffer of the result's shape and dtype (any layout).

Routing (pygpukit/routing/table.py): to the native kernels the lengths whose prime factors are
2, 3, 5 and 7 (fft/ifft up to 4096, the real transforms, even n, up to 8192) and any other
length up to half those (Bluestein; even for the real transforms), every other one to the
Triton kernels (both fp32), NumPy on the CPU. float64/complex128 on the GPU: the native
kernels in float64 at half those lengths, the Triton kernels in float64 past them.
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, complex64, complex128, float32, float64
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["fft", "ifft", "irfft", "rfft", "rfft_frames", "rfft_windowed"]

_NORMS = ("backward", "ortho", "forward")


def _norm_arg(op: str, norm: Any) -> str:
    if norm is None:
        return "backward"
    if not isinstance(norm, str) or norm not in _NORMS:
        raise ValueError(f"{op}: norm must be None or one of {_NORMS}, got {norm!r}")
    return norm


def _n_arg(op: str, n: Any, default: int) -> int:
    if n is None:
        n = default
    elif isinstance(n, bool):
        raise TypeError(f"{op}: n must be an int or None, got {n!r}")
    else:
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"{op}: n must be an int or None, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"{op}: n must be >= 1 (the number of transform points), got {n}")
    return int(n)


def _input(op: str, x: Any, axis: Any, kinds: str) -> tuple[GPUArray, int]:
    """x checked (a GPUArray of the accepted kinds, >= 1 dim) and the normalised axis."""
    chk.array(op, "x", x)
    if x.dtype.kind not in kinds:
        want = {
            "fc": "a float or complex array",
            "f": "a real float array (float16/bfloat16/float32/float64)",
            "c": "a complex array (complex64/complex128)",
        }[kinds]
        raise TypeError(f"{op}: x must be {want}, got {chk.desc(x)}")
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dim, got {chk.desc(x)}")
    return x, chk.axis_arg(op, axis, x.ndim)


def _complex_of(dt: DataType) -> DataType:
    return complex128 if dt in (float64, complex128) else complex64


def _run(
    op: str,
    x: GPUArray,
    ax: int,
    n: int,
    norm: str,
    shape: tuple[int, ...],
    dt: DataType,
    out: GPUArray | None,
) -> GPUArray:
    """Check out, move ``ax`` last, run the routed backend, move it back."""
    chk.out_arg(op, out, shape, dt)
    params = {"n": n, "norm": norm}
    last = x.ndim - 1
    if ax == last:
        return run(op, (x,), params, out=out)  # type: ignore[no-any-return]
    xs = x.swapaxes(ax, last)
    if out is not None:
        run(op, (xs,), params, out=out.swapaxes(ax, last))
        return out
    res: GPUArray = run(op, (xs,), params)
    return res.swapaxes(ax, last).contiguous()


def _moved(shape: tuple[int, ...], ax: int, n_out: int) -> tuple[int, ...]:
    return (*shape[:ax], n_out, *shape[ax + 1 :])


def _complex_to_complex(
    op: str, x: GPUArray, n: int | None, axis: int, norm: str | None, out: GPUArray | None
) -> GPUArray:
    """fft and ifft: real or complex input, a complex result of n points along the axis."""
    x, ax = _input(op, x, axis, "fc")
    nn = _n_arg(op, n, x.shape[ax])
    nm = _norm_arg(op, norm)
    return _run(op, x, ax, nn, nm, _moved(x.shape, ax, nn), _complex_of(x.dtype), out)


def fft(
    x: GPUArray,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """The n-point DFT along ``axis``: X[k] = sum_j x[j] exp(-2 pi i j k / n)."""
    return _complex_to_complex("fft", x, n, axis, norm, out)


def ifft(
    x: GPUArray,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """The n-point inverse DFT along ``axis``: x[j] = (1/n) sum_k X[k] exp(2 pi i j k / n)."""
    return _complex_to_complex("ifft", x, n, axis, norm, out)


def rfft(
    x: GPUArray,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """The n-point DFT of a real signal along ``axis``: its n // 2 + 1 non-negative frequency
    terms (complex64 for float32/float16/bfloat16 input, complex128 for float64)."""
    op = "rfft"
    x, ax = _input(op, x, axis, "f")
    nn = _n_arg(op, n, x.shape[ax])
    nm = _norm_arg(op, norm)
    shape = _moved(x.shape, ax, nn // 2 + 1)
    return _run(op, x, ax, nn, nm, shape, _complex_of(x.dtype), out)


def rfft_windowed(
    x: GPUArray,
    window: GPUArray,
    norm: str | None = None,
    *,
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """rfft(x * window, axis=-1) for real rows x [..., n] and a real window [n] of x's dtype:
    the short-time Fourier transform's step; with ``power`` 1.0 or 2.0, |rfft(x * window)| **
    power, a real result (float32, float64 for float64 x): the magnitude or power spectrogram.

    Both GPU backends multiply the window in as their kernel loads x (Triton: for the lengths
    its one-kernel path serves), so x may be an overlapping strided view of frames that is
    never written out windowed, and take the power as they store (no complex result written
    and read back). The native kernel (powers of two) writes a compact power result; the
    Triton kernel's, through real pairs (even lengths whose real transform pads a factor to
    64), is a strided view of the complex rows it used as scratch. The product is formed in
    fp32 (for half inputs too), in float64 for float64 input."""
    op = "rfft_windowed"
    x, _ = _input(op, x, -1, "f")
    chk.array(op, "window", window)
    n = x.shape[-1]
    if n < 1:
        raise ValueError(f"{op}: x's last dim (the transform length) must be >= 1, got {n}")
    if window.shape != (n,):
        raise ValueError(
            f"{op}: window must have shape ({n},) (x's last dim), got {chk.desc(window)}"
        )
    if window.dtype is not x.dtype:
        raise TypeError(f"{op}: window must have x's dtype {x.dtype.name}, got {chk.desc(window)}")
    if power is not None and (isinstance(power, bool) or power not in (1, 2)):
        raise ValueError(f"{op}: power must be None, 1.0 or 2.0, got {power!r}")
    nm = _norm_arg(op, norm)
    shape = (*x.shape[:-1], n // 2 + 1)
    dt = _complex_of(x.dtype) if power is None else (float64 if x.dtype is float64 else float32)
    chk.out_arg(op, out, shape, dt)
    params: dict[str, Any] = {"n": n, "norm": nm}
    if power is not None:
        params["power"] = float(power)
    return run(op, (x, window), params, out=out)  # type: ignore[no-any-return]


PAD_MODES = ("constant", "reflect", "symmetric", "edge")


def rfft_frames(
    y: GPUArray,
    window: GPUArray,
    *,
    hop: int,
    pad: int = 0,
    pad_mode: str = "constant",
    n_frames: int | None = None,
    norm: str | None = None,
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """The short-time Fourier transform's frames in one op: rfft(frame * window) of the frames
    of n = len(window) samples, hop apart, of each row of y [batch, samples] padded by ``pad``
    on both sides as np.pad's ``pad_mode`` (constant (zeros), reflect, symmetric, edge), over
    the first ``n_frames`` frames (default all: 1 + (samples + 2 pad - n) // hop) ->
    [batch, frames, n // 2 + 1] complex; with ``power`` 1.0 or 2.0 its magnitude or power, a
    real result (as rfft_windowed).

    Both GPU backends read each frame's samples from y in one kernel launch, the padding, the
    window and the power applied as they load and store (no padded, windowed or complex copy):
    the native kernels for the lengths they serve (module docstring), the Triton kernel for
    the lengths its one-kernel FFT serves (other lengths take a padded copy there). A Triton
    power result may be a strided view (see rfft_windowed)."""
    op = "rfft_frames"
    chk.array(op, "y", y)
    if y.dtype.kind != "f":
        raise TypeError(f"{op}: y must be a real float array, got {chk.desc(y)}")
    x = y
    if x.ndim != 2:
        raise ValueError(f"{op}: y must be [batch, samples] (2 dims), got {chk.desc(x)}")
    chk.array(op, "window", window)
    if window.ndim != 1 or window.shape[0] < 1:
        raise ValueError(f"{op}: window must be 1-D with at least 1 value, got {chk.desc(window)}")
    if window.dtype is not x.dtype:
        raise TypeError(f"{op}: window must have y's dtype {x.dtype.name}, got {chk.desc(window)}")
    n_fft, (b, n) = window.shape[0], x.shape
    h = chk.int_arg(op, "hop", hop, 1)
    p = chk.int_arg(op, "pad", pad, 0)
    chk.choice(op, "pad_mode", pad_mode, PAD_MODES)
    if p and n < 1:
        raise ValueError(f"{op}: padding needs at least 1 sample, got {n}")
    if p and pad_mode == "reflect" and n <= p:
        raise ValueError(f"{op}: pad_mode='reflect' needs more than pad={p} samples, got {n}")
    if p and pad_mode == "symmetric" and n < p:
        raise ValueError(f"{op}: pad_mode='symmetric' needs at least pad={p} samples, got {n}")
    if n + 2 * p < n_fft:
        raise ValueError(
            f"{op}: {n} samples padded by {p} on both sides are fewer than one frame of {n_fft}"
        )
    count = 1 + (n + 2 * p - n_fft) // h
    if n_frames is not None:
        want = chk.int_arg(op, "n_frames", n_frames, 1)
        if want > count:
            raise ValueError(f"{op}: n_frames={want} is more than the {count} frames there are")
        count = want
    if power is not None and (isinstance(power, bool) or power not in (1, 2)):
        raise ValueError(f"{op}: power must be None, 1.0 or 2.0, got {power!r}")
    nm = _norm_arg(op, norm)
    dt = _complex_of(x.dtype) if power is None else (float64 if x.dtype is float64 else float32)
    chk.out_arg(op, out, (b, count, n_fft // 2 + 1), dt)
    params: dict[str, Any] = {"n": n_fft, "hop": h, "pad": p, "pad_mode": pad_mode}
    params["n_frames"] = count
    params["norm"] = nm
    if power is not None:
        params["power"] = float(power)
    return run(op, (x, window), params, out=out)  # type: ignore[no-any-return]


def irfft(
    x: GPUArray,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """The inverse of rfft along ``axis``: a real signal of length n (default 2 * (m - 1) for m
    input terms) from its Hermitian half-spectrum; the imaginary parts of the DC and (even n)
    Nyquist terms are ignored, as in numpy.fft.irfft."""
    op = "irfft"
    x, ax = _input(op, x, axis, "c")
    nn = _n_arg(op, n, 2 * (x.shape[ax] - 1))
    nm = _norm_arg(op, norm)
    dt = float64 if x.dtype is complex128 else float32
    return _run(op, x, ax, nn, nm, _moved(x.shape, ax, nn), dt, out)
