"""Plumbing shared by the FFT kernels of both GPU homes (triton_kernels/fft*.py, native/fft.py):
np.pad's mode numbers, the fp32 view of an operand, the norm's scale and the upload of a plan's
constant tables.

Tables (DFT matrices, twiddles, chirps) are cached per length and device. Uploading one is a
copy the next kernel may read from any stream, so ``device_f32`` waits for it, once per table,
never in the steady state; and a CUDA graph capture cannot record it, so the first call of a
length under capture is refused with what to do instead.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from pygpukit import graphs, runtime
from pygpukit._complex import view_as_real
from pygpukit.array import GPUArray
from pygpukit.backends._support.rows import plan_rows
from pygpukit.creation import empty, from_numpy
from pygpukit.errors import CaptureError

__all__ = [
    "PAD_CONSTANT",
    "PAD_EDGE",
    "PAD_MODES",
    "PAD_REFLECT",
    "PAD_SYMMETRIC",
    "Rows",
    "chirp_tables",
    "device_f32",
    "frame_mode",
    "interleaved",
    "norm_scale",
    "operand",
    "plan_transform_rows",
    "uploaded",
]

# np.pad's modes as the kernels number them (0 is "no padding" where a kernel takes it).
PAD_CONSTANT, PAD_REFLECT, PAD_SYMMETRIC, PAD_EDGE = 1, 2, 3, 4
PAD_MODES = {"constant": PAD_CONSTANT, "reflect": PAD_REFLECT, "symmetric": PAD_SYMMETRIC,
             "edge": PAD_EDGE}  # fmt: skip


def operand(a: GPUArray) -> tuple[GPUArray, tuple[int, ...], int]:
    """The fp32-unit view of a real or complex array, its lead strides and element stride."""
    if a.dtype.is_complex:
        f = view_as_real(a)
        return f, f.element_strides[:-2], f.element_strides[-2]
    return a, a.element_strides[:-1], a.element_strides[-1]


class Rows(NamedTuple):
    """How a transform's kernel addresses its rows (plan_transform_rows)."""

    x: GPUArray  # the input (a contiguous copy where its lead dims do not plan)
    y: GPUArray  # the result buffer (fresh where out's lead dims do not plan)
    xf: GPUArray  # x's fp32-unit view, its three lead strides and element stride
    xs: tuple[int, int, int]
    xe: int
    yf: GPUArray  # the same of y
    ys: tuple[int, int, int]
    ye: int
    d: tuple[int, int]  # the sizes of the inner two lead dims (row r = (r / (d0 d1), ...))


def plan_transform_rows(x: GPUArray, y: GPUArray, out: GPUArray | None) -> Rows:
    """The rows of x [..., n] and of its result y [..., m] as up to three collapsed lead dims
    with their own strides each (_support.rows.plan_rows), read and written in place. More
    lead dims that do not merge: x is copied contiguous, and y, when it is ``out``, replaced by
    a fresh array (the caller's deliver copies it back)."""
    lead = x.shape[:-1]
    xf, xs, xe = operand(x)
    yf, ys, ye = operand(y)
    planned = plan_rows(lead or (1,), (xs or (0,), ys or (0,)))
    if planned is None:
        x = x.contiguous()
        if y is out:
            y = empty(y.shape, y.dtype, x.device)
        xf, xs, xe = operand(x)
        yf, ys, ye = operand(y)
        planned = plan_rows(lead, (xs, ys))
        assert planned is not None
    sizes, st = planned
    return Rows(x, y, xf, (st[0][0], st[0][1], st[0][2]), xe, yf,
                (st[1][0], st[1][1], st[1][2]), ye, (sizes[1], sizes[2]))  # fmt: skip


def frame_mode(n: int, window: GPUArray, pad: int, pad_mode: str) -> int:
    """rfft_frames' pad-mode number for the kernels, after checking that n is the window's
    length (the op passes it so; a direct backend call might not). pad 0 still takes the frame
    addressing, in constant mode: nothing outside the signal."""
    if n != window.shape[0]:
        raise ValueError(f"rfft_frames: n={n} must be the window's length {window.shape[0]}")
    return PAD_MODES[pad_mode] if pad else PAD_CONSTANT


def norm_scale(n: int, norm: str, inverse: bool) -> float:
    """The factor numpy.fft's ``norm`` applies to an n-point transform in this direction."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def chirp_tables(n: int, inverse: bool) -> tuple[int, np.ndarray, np.ndarray]:
    """Bluestein's tables of an n-point transform in one direction (complex128): (m, c, bhat),
    the chirp c[j] = exp(-+ i pi j^2 / n) (j^2 reduced mod 2n in exact integers before the
    angle, so the phase is exact for any n) and bhat = FFT_m(b) / m, the FFT of the convolution
    kernel b[j] = conj(c[|j|]) on the circle of m = next_pow2(2n - 1) points (1/m folds the
    inverse transform's scale in). X[k] = c[k] IFFT_m(FFT_m(z c) bhat)[k] (unnormalized
    inverse), k < n."""
    m = 1 << (2 * n - 2).bit_length() if n > 1 else 1
    j = np.arange(n, dtype=np.int64)
    sign = 1.0 if inverse else -1.0
    c = np.exp(sign * 1j * np.pi * ((j * j) % (2 * n)) / n)
    b = np.zeros(m, np.complex128)
    b[:n] = np.conj(c)
    b[m - n + 1 :] = np.conj(c[1:][::-1])
    return m, c, np.fft.fft(b) / m


def interleaved(z: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
    """Complex values as (re, im) pairs of ``dtype`` (float32) along a new last axis."""
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def uploaded(dev: Any) -> None:
    """Wait for a new plan's table uploads: the tables are cached and later read by kernels on
    any stream, which must not race the copy (once per plan, never in the steady state)."""
    if dev.type == "cuda":
        runtime.current_stream(dev).synchronize()


def device_f32(a: np.ndarray, dev: Any, dtype: Any = np.float32) -> GPUArray:
    """One table on the device (as ``dtype``, float32 unless asked), its copy finished before it
    can enter a cache (a kernel on another stream may read it next). Refused under a CUDA graph
    capture (module docstring)."""
    if dev.type == "cuda" and graphs.is_capturing(dev):
        raise CaptureError(
            "fft: the first call of a transform length uploads its plan tables, which cannot "
            "happen inside a CUDA graph capture; run the same FFT once before capturing"
        )
    t = from_numpy(np.ascontiguousarray(a, dtype=dtype), device=dev)
    uploaded(dev)
    return t
