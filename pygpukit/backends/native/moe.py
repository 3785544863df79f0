"""The grouped expert product on the native backend (native/src/moe: CUTLASS's Hopper ptr-array
grouped GEMM): the implementation of the routed op moe_linear for float16/bfloat16 experts
with rows of a multiple of 8 elements, same signature and contract as the NumPy reference
(pygpukit/backends/cpu/moe.py) and the Triton twin.

One call gathers the slots' x rows, builds the groups' problems on the device, runs one grouped
GEMM (2E groups for the gated form) with float32 results, and finishes each slot into its routed
row (silu(g) * u, the routing weight, one rounding). The scratch (gathered rows, float32
products, group arrays, CUTLASS's workspace) is one pool allocation a call, sized by the
extension. Nothing is read back to the host: the call is graph-capturable.
"""

from __future__ import annotations

from pygpukit import _memory
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends.native._common import aligned, aligned_rows, scratch, stream_of
from pygpukit.backends.native._libs import extension

__all__ = ["moe_linear"]


def moe_linear(
    x: GPUArray,
    w: GPUArray,
    rows: GPUArray,
    block_expert: GPUArray,
    w_up: GPUArray | None,
    row_scale: GPUArray | None,
    *,
    top_k: int,
    block_m: int,
    out: GPUArray | None = None,
) -> GPUArray:
    e, n, k = w.shape
    r = x.shape[0] * top_k
    y = target(out, (r, n), x._dtype, x, align=16)
    if r == 0 or n == 0:
        return deliver(y, out)
    if k == 0:  # empty sums: zeros, as the twins give (rows no block lists included)
        _memory.fill(y, 0)
        return deliver(y, out)
    x, _, _, sx0 = aligned_rows(x)
    w = aligned(w)
    wu = None if w_up is None else aligned(w_up)
    ru, be = aligned(rows), aligned(block_expert)
    scale = None if row_scale is None else aligned(row_scale)
    ext = extension()
    dev = x._device.index
    nb = be.shape[0]
    dt = x._dtype.name
    ws_bytes = ext.moe_grouped_workspace(dev, dt, e, n, k, nb * block_m, wu is not None, block_m)
    _ws, ws_ptr = scratch(ws_bytes, x)
    # fmt: off
    ext.moe_grouped(
        dev, stream_of(x), dt, x.data_ptr(), x.shape[0], sx0, top_k,
        w.data_ptr(), 0 if wu is None else wu.data_ptr(), e, n, k,
        ru.data_ptr(), be.data_ptr(), nb, block_m,
        0 if scale is None else scale.data_ptr(), y.data_ptr(), ws_ptr, int(ws_bytes),
    )
    # fmt: on
    return deliver(y, out)
