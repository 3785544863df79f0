"""FP8 quantize / dequantize on the native backend: the twins of triton_kernels/quant.py,
same signatures and numerics (native/src/quant/quant.cu; the reference is
pygpukit/backends/cpu/quant.py, matched bit for bit: codes and scales).

x (or q) is viewed as [R, C]: read in place when its leading dims merge into one stride, else
copied first. q comes out contiguous, scale contiguous in ``scale_shape``; dequantize writes a
contiguous result (an out= of another layout receives a copy). Per-tensor scales take two
launches (partial amax per block, then quantize), with a workspace of at most 2 partials per SM.
"""

from __future__ import annotations

from typing import Any

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends._support.rows import as_2d
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty
from pygpukit.dtypes import as_dtype

__all__ = ["dequantize_fp8", "quantize_fp8"]

_CHUNK = 2048  # elements per block of the per-tensor launches (quant.cu kChunk)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sm_count(x: GPUArray) -> int:
    return runtime.sm_count(x._device)


def quantize_fp8(
    x: GPUArray,
    *,
    dtype: Any = "float8_e4m3fn",
    group: tuple[int, int],
    scale_shape: tuple[int, ...],
    out: GPUArray | None = None,
) -> tuple[GPUArray, GPUArray]:
    """(q, scale) with one scale per ``group`` of x's [R, C] view (module docstring)."""
    del out  # two results: the op layer passes none
    dt = as_dtype(dtype)
    x2, rows, cols, sr, sc = as_2d(x, GPUArray.contiguous)
    gr, gc = group
    q = empty(x._shape, dt, x._device)
    nr, nc = _cdiv(rows, gr), _cdiv(cols, gc)
    scale = empty((nr, nc), "float32", x._device)
    partial: GPUArray | None = None
    n_partial = 0
    if gr >= rows and gc >= cols:  # per tensor: the workspace of the first launch
        n_partial = min(_cdiv(rows * cols, _CHUNK), 2 * _sm_count(x))
        partial = empty((n_partial,), "float32", x._device)
    # fmt: off
    extension().quantize_fp8(
        x._device.index, stream_of(x), x._dtype.name, dt.name, rows, cols, sr, sc,
        x2.data_ptr(), q.data_ptr(), scale.data_ptr(), gr, gc,
        0 if partial is None else partial.data_ptr(), n_partial,
    )
    # fmt: on
    return q, scale.view(scale_shape)


def dequantize_fp8(
    q: GPUArray,
    scale: GPUArray,
    *,
    out_dtype: Any = "bfloat16",
    group: tuple[int, int],
    out: GPUArray | None = None,
) -> GPUArray:
    """q * scale rounded once to ``out_dtype`` (one scale per ``group`` of q's [R, C] view)."""
    dt = as_dtype(out_dtype)
    q2, rows, cols, sr, sc = as_2d(q, GPUArray.contiguous)
    gr, gc = group
    s2 = scale.reshape(_cdiv(rows, gr), _cdiv(cols, gc))
    ssr, ssc = s2._estrides
    y = target(out, q._shape, dt, q)
    # fmt: off
    extension().dequantize_fp8(
        q._device.index, stream_of(q), q._dtype.name, dt.name, rows, cols, sr, sc,
        q2.data_ptr(), s2.data_ptr(), ssr, ssc, gr, gc, y.data_ptr(),
    )
    # fmt: on
    return deliver(y, out)
