"""Median filtering along one axis: ``median_filter(x, size, axis=-1)``.

y[..., i, ...] is the median of the ``size`` values x[..., i - size // 2 : i + size // 2 + 1, ...]
along ``axis``, the axis extended by half-sample reflection (d c b a | a b c d | d c b a), which is
scipy.ndimage.median_filter(x, size=(1, ..., size, ..., 1), mode='reflect'): librosa's HPSS
filters a spectrogram [..., freq, frames] so along the frames (axis -1) and the frequencies
(axis -2). A window longer than the axis reflects repeatedly (np.pad mode 'symmetric'); scipy
1.17's one-dimensional rank filter reads past the array for some windows several times longer
than the axis, so it is no reference there.

- ``size``: an odd int in [1, MAX_SIZE] (the window sits centred on its output; an even size has
  no centre). 1 copies x.
- dtypes: float16, bfloat16, float32, float64; the result has x's dtype. The median is a
  selection, so no value is rounded: every backend returns the same bits. -0.0 ranks below +0.0;
  a window holding a NaN gives NaN (np.median's rule; scipy.ndimage's result there depends on
  where the NaN sits).
- ``out``: an optional buffer of x's shape and dtype (any layout).

Routing (pygpukit/routing/table.py): the Triton kernel (backends/triton_kernels/median.py) on
CUDA, NumPy on the CPU (backends/cpu/median.py, the reference); no native twin. The backends
filter the last axis; another axis is moved there as a strided view, and the result is written
through the same view of a C-contiguous array, so no extra copy is made.
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["median_filter", "MAX_SIZE"]

# A window is held in registers, padded to a power of two (256 keys per output at this size).
MAX_SIZE = 255


def check_size(op: str, name: str, size: Any) -> int:
    """size as an odd int in [1, MAX_SIZE]: TypeError for a non-int (bool included), ValueError
    for a value outside the range or even."""
    if isinstance(size, bool):
        raise TypeError(f"{op}: {name} must be an odd int, got {size!r}")
    try:
        s = operator.index(size)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an odd int, got {type(size).__name__}") from None
    if s < 1 or s > MAX_SIZE:
        raise ValueError(f"{op}: {name} must be an odd int in [1, {MAX_SIZE}], got {s}")
    if s % 2 == 0:
        raise ValueError(f"{op}: {name} must be odd (a window centred on its output), got {s}")
    return int(s)


def median_filter(
    x: GPUArray, size: int, axis: int = -1, *, out: GPUArray | None = None
) -> GPUArray:
    """The running median of ``size`` (odd) values along ``axis``, the axis extended by
    half-sample reflection (scipy.ndimage.median_filter's mode 'reflect'); a window holding a
    NaN gives NaN. See the module docstring."""
    op = "median_filter"
    chk.array(op, "x", x)
    chk.floating(op, "x", x)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dim, got {chk.desc(x)}")
    s = check_size(op, "size", size)
    if isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    ax = chk.axis_arg(op, axis, x.ndim)
    chk.out_arg(op, out, x.shape, x.dtype)
    params = {"size": s}
    last = x.ndim - 1
    if ax == last:
        return run(op, (x,), params, out=out)  # type: ignore[no-any-return]
    y = out if out is not None else empty(x.shape, x.dtype, x.device)
    run(op, (x.swapaxes(ax, last),), params, out=y.swapaxes(ax, last))
    return y
