"""FFTs on the native backend (native/src/fft): the twin of triton_kernels/fft.py with the same
functions, signatures and numerics (numpy.fft's semantics, fp32 arithmetic with
float64-rounded twiddles), and float64 (complex128): float64 values, twiddles and arithmetic
(the Triton kernels serve float64 at the other lengths).

Lengths served (the routing table's ``smooth`` constraint; others go to the Triton kernels):
fft and ifft n <= 4096 whose prime factors are 2, 3, 5 and 7 (7-smooth) and any n <= 2048;
rfft, irfft, rfft_windowed and rfft_frames even n <= 8192 (7-smooth) and any even n <= 4096,
half those in float64 (a row's float64 planes fill the same shared memory), the real ones as
the n / 2-point complex transform of x[2j] + i x[2j+1] and an untangling step in the same
kernel (irfft: its inverse). Powers of two run the compile-time radix-8 kernel
(fft_kernel.cuh), the other lengths the mixed-radix kernel (fft_mixed.cu: radices 7, 5, 3, 8,
4, 2, ``mixed_radices``), the lengths with a larger prime factor by Bluestein's convolution on
a power of two M >= 2N - 1 points in that kernel. One launch a call: a row is read
once (the window and an STFT frame's padding applied as it loads) and written once (|X| or
|X|^2 taken as it stores, into a compact result), with the transform in shared memory.

Rows are addressed as the Triton twin addresses them (_support.fft.plan_transform_rows: up to
three collapsed lead dims with their own strides; more are copied first), the last dim with any
element stride. Graph capture: a length's twiddle table is uploaded on its first call, so run
each length once before capturing (as the Triton plans).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends._support.fft import (
    chirp_tables,
    device_f32,
    frame_mode,
    interleaved,
    norm_scale,
    operand,
    plan_transform_rows,
)
from pygpukit.backends._support.output import deliver
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty
from pygpukit.dtypes import complex64, complex128, float32, float64

__all__ = [
    "MAX_COMPLEX",
    "MAX_COMPLEX_F64",
    "MIXED_RADICES",
    "fft",
    "ifft",
    "irfft",
    "mixed_radices",
    "radices",
    "rfft",
    "rfft_frames",
    "rfft_windowed",
    "twiddle_table",
]

MAX_COMPLEX = 4096  # points of the kernel's complex transform (a row in shared memory)
MAX_COMPLEX_F64 = 2048  # the same in float64 (native/src/fft/fft_kernel.cuh kMaxLog2F64)
# The mixed-radix kernel's radices in the order it runs them (native/src/fft/fft.h
# fft_radix_slot: the odd ones first, whose first-pass writes are free of bank conflicts).
MIXED_RADICES = (7, 5, 3, 8, 4, 2)
# What the kernel loads and stores (native/src/fft/fft.h).
_COMPLEX, _REAL, _PAIRS, _HERMITIAN = 0, 1, 2, 3
_STORE_COMPLEX, _STORE_REAL = 0, 3

_lock = threading.Lock()
_tables: dict[tuple[tuple[int, ...], int, bool, bool | None, bool, Any], GPUArray] = {}


def radices(log2n: int) -> list[int]:
    """The power-of-two kernel's passes for 2^log2n points (fft_kernel.cuh's Shape): radix 8,
    the last 2 or 4 when log2n is not a multiple of 3; one pass of all the points below 8."""
    n = 1 << log2n
    if n < 8:
        return [n] if n > 1 else []
    return [8] * (log2n // 3) + ([1 << (log2n % 3)] if log2n % 3 else [])


def mixed_radices(n: int) -> list[int] | None:
    """The mixed-radix kernel's passes for n points (n >= 2), in MIXED_RADICES' order: n = 2^a
    3^b 5^c 7^d as d 7s, c 5s, b 3s, a // 3 8s and a 4 or a 2 for the rest of a; None when n
    has another prime factor."""
    if n < 2:
        return None
    counts = {}
    for p in (7, 5, 3, 2):
        counts[p] = 0
        while n % p == 0:
            n //= p
            counts[p] += 1
    if n != 1:
        return None
    a = counts[2]
    tail = [4] if a % 3 == 2 else [2] if a % 3 == 1 else []
    return [7] * counts[7] + [5] * counts[5] + [3] * counts[3] + [8] * (a // 3) + tail


def twiddle_table(
    passes: list[int], untangle: bool, points: int | None = None, chirp: bool | None = None
) -> np.ndarray:
    """The kernel's twiddles (fft.cu) for the passes' radices (``radices`` or
    ``mixed_radices``): for each pass p after the first (sub-transforms of Ns points, radix R)
    w_(Ns R)^(t k) at [t - 1][k], t < R, k < Ns; then, for the pair loads, w_2N^k for k <= N
    (N: ``points``, default the radices' product); then, for Bluestein (``chirp``: None, or
    its direction, True for the inverse), the chirp (N values) and bhat (the passes' M) of
    _support.fft.chirp_tables. complex128; exponents reduced mod the root's order in integers,
    so every angle is exact to float64 rounding."""
    parts = []
    ns = 1
    for r in passes:
        if ns > 1:
            t = np.arange(1, r, dtype=np.int64)[:, None]
            k = np.arange(ns, dtype=np.int64)[None, :]
            parts.append(np.exp(-2j * np.pi * ((t * k) % (ns * r)) / (ns * r)).ravel())
        ns *= r
    n = ns if points is None else points
    if untangle:
        parts.append(np.exp(-2j * np.pi * np.arange(n + 1, dtype=np.int64) / (2 * n)))
    if chirp is not None:
        m, c, bhat = chirp_tables(n, chirp)
        assert m == ns, (m, ns)
        parts += [c, bhat]
    return np.concatenate(parts) if parts else np.ones(1, np.complex128)


class _Plan(NamedTuple):
    """How the kernels transform N points: log2n >= 0 for the power-of-two kernel (its passes
    ``radices``), else -1 and the mixed-radix kernel's passes (of N, or of Bluestein's M)."""

    log2n: int
    passes: tuple[int, ...]
    points: int
    bluestein: bool


def _twiddles(plan: _Plan, untangle: bool, inverse: bool, f64: bool, dev: Any) -> GPUArray:
    """twiddle_table as float32 (float64) pairs on dev, uploaded on the length's first call
    (cached; a Bluestein table is for one direction)."""
    chirp = inverse if plan.bluestein else None
    key = (plan.passes, plan.points, untangle, chirp, f64, dev)
    got = _tables.get(key)
    if got is None:
        with _lock:
            got = _tables.get(key)
            if got is None:
                dt = np.float64 if f64 else np.float32
                table = twiddle_table(list(plan.passes), untangle, plan.points, chirp)
                got = _tables[key] = device_f32(interleaved(table, dt), dev, dt)
    return got


def _plan(op: str, n: int, pairs: bool, f64: bool = False) -> _Plan:
    """The kernel and passes of an n-point transform (n // 2 complex points through pairs):
    powers of two, 7-smooth lengths up to the top, any other length up to half of it by
    Bluestein (its M-point buffers take the shared memory the top's do)."""
    points = n // 2 if pairs else n
    top = MAX_COMPLEX_F64 if f64 else MAX_COMPLEX
    most = 2 * top if pairs else top
    if n < (2 if pairs else 1) or (pairs and n % 2) or points > top:
        raise ValueError(
            f"{op}: the native FFT serves {'even ' if pairs else ''}lengths "
            f"{2 if pairs else 1}..{most} (other than 7-smooth ones, up to {most // 2}), got "
            f"n={n} (the Triton twin serves every length)"
        )
    if points & (points - 1) == 0:
        log2n = points.bit_length() - 1
        return _Plan(log2n, tuple(radices(log2n)), points, False)
    mixed = mixed_radices(points)
    if mixed is not None:
        return _Plan(-1, tuple(mixed), points, False)
    if 2 * points > top:
        raise ValueError(
            f"{op}: the native FFT serves lengths with a prime factor above 7 up to "
            f"{most // 2}, got n={n} (the Triton twin serves every length)"
        )
    m = 1 << (2 * points - 2).bit_length()
    blue = mixed_radices(m)
    assert blue is not None
    return _Plan(-1, tuple(blue), points, True)


def _result(store: int, f64: bool) -> Any:
    """The result dtype of a store kind: complex or real, float32 or float64."""
    if store == _STORE_COMPLEX:
        return complex128 if f64 else complex64
    return float64 if f64 else float32


def _store_of(power: float | None) -> int:
    return _STORE_COMPLEX if power is None else int(power)  # fft.h: 1 |X|, 2 |X|^2


def _launch(
    x: GPUArray,
    xs: tuple[int, int, int],
    xe: int,
    y: GPUArray,
    ys: tuple[int, int, int],
    ye: int,
    rows: int,
    d: tuple[int, int],
    *,
    plan: _Plan,
    inverse: bool,
    load: int,
    n_in: int,
    n_out: int,
    store: int,
    scale: float,
    dtype: str,
    win: GPUArray | None = None,
    frames: tuple[int, int, int, int] = (0, 0, 0, 0),
) -> None:
    f64 = dtype == "float64"
    tw = _twiddles(plan, load in (_PAIRS, _HERMITIAN), inverse, f64, x._device)
    hop, pad, sig_len, mode = frames
    mixed = list(plan.passes) if plan.log2n < 0 else []
    # fmt: off
    extension().fft_rows(
        x._device.index, stream_of(x), plan.log2n, inverse, f64, load, dtype, x.data_ptr(), rows,
        d[0], d[1], *xs, xe, n_in, 0 if win is None else win.data_ptr(), hop, pad, sig_len, mode,
        y.data_ptr(), *ys, ye, n_out, store, scale, tw.data_ptr(), mixed, plan.points,
        plan.bluestein,
    )
    # fmt: on


def _transform(
    op: str,
    x: GPUArray,
    out: GPUArray | None,
    *,
    n: int,
    norm: str,
    inverse: bool,
    load: int,
    n_out: int,
    store: int,
    win: GPUArray | None = None,
) -> GPUArray:
    f64 = x.dtype in (float64, complex128)
    plan = _plan(op, n, load in (_PAIRS, _HERMITIAN), f64)
    lead = x.shape[:-1]
    shape = (*lead, n_out)
    y = out if out is not None else empty(shape, _result(store, f64), x._device)
    rows = 1
    for v in lead:
        rows *= v
    if rows == 0:
        return deliver(y, out)
    r = plan_transform_rows(x, y, out)
    dtype = ("float64" if f64 else "float32") if x.dtype.is_complex else x.dtype.name
    _launch(
        r.xf, r.xs, r.xe, r.yf, r.ys, r.ye, rows, r.d, plan=plan, inverse=inverse, load=load,
        n_in=min(x.shape[-1], n // 2 + 1 if load == _HERMITIAN else n), n_out=n_out,
        store=store, scale=norm_scale(n, norm, inverse), dtype=dtype, win=win,
    )  # fmt: skip
    return deliver(r.y, out)


def fft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Forward n-point DFT of x's rows (real or complex) -> complex64 (complex128 from
    float64 / complex128 x)."""
    load = _COMPLEX if x.dtype.is_complex else _REAL
    return _transform("fft", x, out, n=n, norm=norm, inverse=False, load=load, n_out=n,
                      store=_STORE_COMPLEX)  # fmt: skip


def ifft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Inverse n-point DFT of x's rows (real or complex) -> complex64 (complex128 from
    float64 / complex128 x)."""
    load = _COMPLEX if x.dtype.is_complex else _REAL
    return _transform("ifft", x, out, n=n, norm=norm, inverse=True, load=load, n_out=n,
                      store=_STORE_COMPLEX)  # fmt: skip


def rfft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """The n // 2 + 1 non-negative frequency terms of real rows -> complex64 (complex128 from
    float64 x)."""
    return _transform("rfft", x, out, n=n, norm=norm, inverse=False, load=_PAIRS,
                      n_out=n // 2 + 1, store=_STORE_COMPLEX)  # fmt: skip


def irfft(x: GPUArray, *, n: int, norm: str = "backward", out: GPUArray | None = None) -> GPUArray:
    """Real rows of length n from their n // 2 + 1 Hermitian terms -> float32 (float64 from
    complex128 x)."""
    return _transform("irfft", x, out, n=n, norm=norm, inverse=True, load=_HERMITIAN, n_out=n,
                      store=_STORE_REAL)  # fmt: skip


def rfft_windowed(
    x: GPUArray,
    window: GPUArray,
    *,
    n: int,
    norm: str = "backward",
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """rfft(x * window) of real rows of n values -> complex64 (complex128 for float64), or
    |rfft(x * window)| ** power (power 1.0 or 2.0) -> float32 (float64), compact. The window
    multiplies each value as it loads, in the working precision (x may be an overlapping
    strided view of frames)."""
    return _transform(
        "rfft_windowed", x, out, n=n, norm=norm, inverse=False, load=_PAIRS, n_out=n // 2 + 1,
        store=_store_of(power), win=window.contiguous(),
    )  # fmt: skip


def rfft_frames(
    y: GPUArray,
    window: GPUArray,
    *,
    n: int,
    hop: int,
    pad: int,
    pad_mode: str,
    n_frames: int,
    norm: str = "backward",
    power: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """rfft(frames * window) [batch, n_frames, n // 2 + 1] (n = len(window)) of the frames hop
    apart of y [batch, samples] padded by pad on both sides as np.pad's pad_mode, or its
    magnitude / power (power 1 or 2): one launch reading each frame's samples from y, the
    padding and the window applied as it loads."""
    mode = frame_mode(n, window, pad, pad_mode)
    f64 = y.dtype is float64
    plan = _plan("rfft_frames", n, True, f64)
    b, samples = y.shape
    nb = n // 2 + 1
    store = _store_of(power)
    res = out if out is not None else empty((b, n_frames, nb), _result(store, f64), y._device)
    if b * n_frames == 0:
        return deliver(res, out)
    rf, rs, re = operand(res)
    win = window.contiguous()
    _launch(
        y, (0, y.element_strides[0], 0), y.element_strides[1], rf, (0, rs[0], rs[1]), re,
        b * n_frames, (b, n_frames), plan=plan, inverse=False, load=_PAIRS, n_in=n,
        n_out=nb, store=store, scale=norm_scale(n, norm, False), dtype=y.dtype.name, win=win,
        frames=(hop, pad, samples, mode),
    )  # fmt: skip
    return deliver(res, out)
