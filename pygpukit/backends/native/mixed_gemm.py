"""The int4 and fp8 products with the weight rounded to x's dtype on the native backend
(native/src/mixed_gemm: CUTLASS's Hopper mixed-input mainloop, sm_90 only): the implementations
of the routed ops qgemm_int4_dense and qgemm_fp8_dense, same signatures and contract as the
NumPy references (pygpukit/backends/cpu/qgemm.py).

Each weight is dequantized in registers to x's dtype (data * scale in float32, rounded to x's
dtype: the weight gp.linear_quantized's dense path expands), the products accumulate in float32
and the bias joins the float32 sum before the one rounding to x's dtype. So it is the dense
path (dequantize_weight, then linear) without the N x K expansion. The routing table sends this
kernel weights with K a multiple of 128 and N a multiple of 8 (TMA's 16-byte rows); the
extension checks them again. One pool allocation a call
holds the 128-block scales transposed for CUTLASS (as they are when of x's dtype, else as
float32; fp8 per-channel scales are read in place) and CUTLASS's workspace. Nothing is read back
to the host: the call is graph-capturable.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends.native._common import aligned, aligned_rows, scratch, stream_of
from pygpukit.backends.native._libs import extension

__all__ = ["qgemm_fp8_dense", "qgemm_int4_dense"]


def _run(
    fmt: str,
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None,
    block: int,
    out: GPUArray | None,
) -> GPUArray:
    n, k = data.shape
    lead = x.shape[:-1]
    x, m, _, sx = aligned_rows(x)
    y = target(out, (*lead, n), x._dtype, x, align=16)
    if m == 0 or n == 0:
        return deliver(y, out)
    data, scales = aligned(data), aligned(scales)
    b = None if bias is None else aligned(bias)
    ext = extension()
    dev = x._device.index
    dt, sdt = x._dtype.name, scales._dtype.name
    ws_bytes = int(ext.mixed_gemm_workspace(dev, fmt, dt, sdt, m, n, k, block))
    _ws, ws_ptr = scratch(ws_bytes, x)
    # fmt: off
    ext.mixed_gemm(
        dev, stream_of(x), fmt, dt, x.data_ptr(), m, k, sx, data.data_ptr(), n,
        scales.data_ptr(), sdt, block, 0 if b is None else b.data_ptr(),
        y.data_ptr(), ws_ptr, ws_bytes,
    )
    # fmt: on
    return deliver(y, out)


def qgemm_int4_dense(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    group: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ round_x(scales * data)^T (+ bias): x [..., K] float16/bfloat16, data int4 [N, K],
    scales [N, K / 128] float32/float16/bfloat16 (group 128), bias [N] of x's dtype."""
    return _run("int4", x, data, scales, bias, group, out)


def qgemm_fp8_dense(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    block: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ round_x(scales * data)^T (+ bias): x [..., K] float16/bfloat16, data float8_e4m3fn
    [N, K], float32 scales [N] (block 0) or [N, K / 128] (block 128), bias [N] of x's dtype."""
    return _run("fp8", x, data, scales, bias, block, out)
