"""Decode GEMV and quantized-weight products on the native backend (native/src/gemv): the
implementations of the routed ops gemv, gemv_fp8, gemv_int4 and gemv_nvfp4, with the signatures
of their NumPy references (pygpukit/backends/cpu/gemv.py), plus ``linear_rows``, the entry
pygpukit/backends/native/matmul.py uses when gp.linear hands a small-M product to the GEMV kernel.

The kernels read x and W with 16-byte loads: x is read in place when its rows step with one
stride that keeps them 16-byte aligned (last dim contiguous), else copied first; a dense weight
is read in place when its rows are contiguous and 16-byte aligned, else copied (a full copy of
W per call: keep weights contiguous). Quantized data and scales are contiguous by construction
(QuantizedWeight). y comes out contiguous (an out= of another layout receives a copy).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends._support.rows import rows_of
from pygpukit.backends.native._common import aligned, aligned_rows, stream_of
from pygpukit.backends.native._libs import extension

__all__ = ["gemv", "gemv_fp8", "gemv_int4", "gemv_nvfp4", "linear_rows"]


def _ext() -> Any:
    """The extension, which must have been built with the gemv family."""
    ext = extension()
    if not hasattr(ext, "gemv"):
        from pygpukit.errors import BackendUnavailableError

        raise BackendUnavailableError(
            f"_pygpukit_native was built without the gemv family (it has {ext.families}); "
            "rebuild with scripts/build_native.sh"
        )
    return ext


def _ready(a: GPUArray | None) -> GPUArray | None:
    """An optional operand (bias, scales) made aligned."""
    return None if a is None else aligned(a)


def _run(
    fmt: str,
    x: GPUArray,
    w: GPUArray,
    w_row_bytes: int,
    n: int,
    scales: GPUArray | None,
    s_row: int,
    block: int,
    global_scale: float,
    bias: GPUArray | None,
    out: GPUArray | None,
) -> GPUArray:
    lead = x.shape[:-1]
    x, m, k, sx = aligned_rows(x)
    y = target(out, (*lead, n), x._dtype, x)
    bias, scales = _ready(bias), _ready(scales)
    # fmt: off
    _ext().gemv(
        x._device.index, stream_of(x), fmt, x._dtype.name,
        "float32" if scales is None else scales._dtype.name, m, n, k,
        x.data_ptr(), sx, w.data_ptr(), w_row_bytes,
        0 if scales is None else scales.data_ptr(), s_row, block, float(global_scale),
        0 if bias is None else bias.data_ptr(), y.data_ptr(),
    )
    # fmt: on
    return deliver(y, out)


def gemv(
    x: GPUArray, w: GPUArray, bias: GPUArray | None = None, *, out: GPUArray | None = None
) -> GPUArray:
    """x [..., K] @ w[N, K]^T (+ bias) with w of x's dtype (float16/bfloat16)."""
    n = w.shape[0]
    got = rows_of(w)
    if got is None or w.data_ptr() % 16 or (got[2] * w.itemsize) % 16:
        w = w.copy()
        got = rows_of(w)
        assert got is not None
    return _run("dense", x, w, got[2] * w.itemsize, n, None, 1, 0, 1.0, bias, out)


def gemv_fp8(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    block: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (scales * data)^T (+ bias): data float8_e4m3fn [N, K], float32 scales [N] (block 0)
    or [N, ceil(K/128)] (block 128)."""
    n, k = data.shape
    s_row = 1 if block == 0 else scales.shape[1]
    return _run("fp8", x, aligned(data), k, n, scales, s_row, block, 1.0, bias, out)


def gemv_int4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    group: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (scales * data)^T (+ bias): data int4 [N, K], scales [N, ceil(K/128)]."""
    n, k = data.shape
    # fmt: off
    return _run(
        "int4", x, aligned(data), k // 2, n, scales, scales.shape[1], group, 1.0, bias, out,
    )
    # fmt: on


def gemv_nvfp4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ dequant(data)^T (+ bias): e2m1 codes uint8 [N, K/2], e4m3 scales [N, K/16]."""
    n, half_k = data.shape
    # fmt: off
    return _run(
        "nvfp4", x, aligned(data), half_k, n, scales, scales.shape[1], 16, global_scale, bias, out,
    )
    # fmt: on


def linear_rows(
    x: GPUArray, w: GPUArray, y: GPUArray, m: int, n: int, k: int, bias: GPUArray | None
) -> None:
    """y[m, n] = x[m, k] @ w[n, k]^T (+ bias) for contiguous, 16-byte aligned x, w, y and bias
    of one half dtype, k % 8 == 0 (the caller, native._gemm_rows, checked all of it)."""
    # fmt: off
    _ext().gemv(
        y._device.index, stream_of(y), "dense", y._dtype.name, "float32", m, n, k,
        x.data_ptr(), k, w.data_ptr(), 2 * k, 0, 1, 0, 1.0,
        0 if bias is None else bias.data_ptr(), y.data_ptr(),
    )
    # fmt: on
