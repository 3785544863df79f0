"""Integer matmul on the native backend (native/src/matmul_int): np.matmul's rules and
semantics for int8 / uint8 / int16 / int32 / int64 results, every product and sum wrapping around
in the result type (NumPy accumulates in the result type).

pygpukit/backends/native/matmul.py's ``matmul`` (the routing table's native candidate of gp.matmul,
cuBLASLt for floats) hands integer result dtypes to ``matmul`` here. Inputs of another dtype are
cast to the result dtype first (the ``cast`` op), as np.matmul does. The kernel reads any element
strides of the two inner dims in place (transposed views included); batch dims broadcast with
stride 0 and are planned as native.py plans cuBLASLt batches (the same _layout.plan_batches): one
batch stride per operand, with a host loop over the outer dims that cannot be stepped with one
stride. The result is written contiguous (an out= of another layout receives a copy).
"""

from __future__ import annotations

from typing import Any

from pygpukit import _layout
from pygpukit.array import GPUArray
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.dtypes import DataType, as_dtype, result_type

__all__ = ["INT_DTYPES", "matmul"]

INT_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8"})


def _ext() -> Any:
    ext = extension()
    if not hasattr(ext, "matmul_int"):
        from pygpukit.errors import BackendUnavailableError

        built = ", ".join(getattr(ext, "families", ())) or "none"
        raise BackendUnavailableError(
            "matmul: integer products need the matmul_int family of _pygpukit_native, which "
            f"this build lacks (it has {built}); rebuild with scripts/build_native.sh"
        )
    return ext


def _gemm(a: GPUArray, b: GPUArray, d: GPUArray) -> None:
    """d[..., M, N] = a[..., M, K] @ b[..., K, N]; d contiguous, all of d's dtype, M, N, K >= 1."""
    ext = _ext()
    dt = d._dtype
    lead = d._shape[:-2]
    m, n = d._shape[-2], d._shape[-1]
    k = a._shape[-1]
    a = a.broadcast_to((*lead, m, k))
    b = b.broadcast_to((*lead, k, n))
    sa, sb, sd = a._estrides[:-2], b._estrides[:-2], d._estrides[:-2]
    # Loop over the fewest outer batch dims that leave both operands one batch stride each.
    plan = _layout.plan_batches(lead, sa, sb)
    batch = plan.batch
    stride_a, stride_b = plan.strides
    sam, sak = a._estrides[-2], a._estrides[-1]
    sbk, sbn = b._estrides[-2], b._estrides[-1]
    item = dt.itemsize
    dev, stream = d._device.index, stream_of(d)
    a0, b0, d0 = a.data_ptr(), b.data_ptr(), d.data_ptr()
    for oa, ob, od in _layout.loop_offsets(plan.loop, sa, sb, sd):
        # fmt: off
        ext.matmul_int(dev, stream, dt.name, batch, m, n, k, a0 + oa * item, stride_a, sam, sak,
                       b0 + ob * item, stride_b, sbk, sbn, d0 + od * item)
        # fmt: on


def matmul(
    a: GPUArray, b: GPUArray, *, out: GPUArray | None = None, out_dtype: Any = None
) -> GPUArray:
    """a @ b with np.matmul's rules for an integer result dtype (wraparound in that dtype)."""
    dt: DataType = as_dtype(out_dtype) if out_dtype is not None else result_type(a, b)
    if dt.name not in INT_DTYPES:
        raise TypeError(
            f"matmul: the native integer product serves {sorted(INT_DTYPES)}, got {dt.name}"
        )
    from pygpukit.backends._support.matmul_shape import product

    a = a if a._dtype is dt else a.astype(dt)
    b = b if b._dtype is dt else b.astype(dt)
    return product(a, b, dt, out, _gemm)
