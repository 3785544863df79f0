"""Row layouts and result dtypes shared by the native activation, softmax, rope and embedding
adapters.

The kernels of these families read and write arrays as rows of their last dim, the last dim
contiguous and consecutive rows one element stride apart (flat over the leading dims). That is
the layout of the common cases, read in place: contiguous arrays, the gate/up halves of a fused
projection, every other row, a row-strided out=. Anything else is copied first (``contiguous()``,
the routed copy op), and an out= of another layout receives a copy of a contiguous result.
"""

from __future__ import annotations

from pygpukit._layout import single_stride
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType

__all__ = ["compute_name", "deliver", "in_rows", "out_rows", "row_stride", "served_as"]

_HALF = frozenset({"float16", "bfloat16"})


def row_stride(x: GPUArray) -> int | None:
    """The element stride between consecutive rows of x's last dim (flat over the leading dims),
    or None when x does not read that way (last dim not contiguous, leading dims that do not
    step uniformly). A single row gives its length; rows broadcast along every leading dim give
    0; negative strides give None."""
    shape, st = x._shape, x._estrides
    n = shape[-1] if shape else 1
    if shape and n > 1 and st[-1] != 1:
        return None
    step = single_stride(shape[:-1], st[:-1], n)
    return None if step is None or step < 0 else step


def in_rows(x: GPUArray) -> tuple[GPUArray, int]:
    """(x, its row stride), or (x's contiguous copy, n) when x does not read as rows."""
    s = row_stride(x)
    if s is None:
        x = x.contiguous()
        s = x._shape[-1] if x._shape else 1
    return x, s


def out_rows(
    op: str, out: GPUArray | None, shape: tuple[int, ...], dt: DataType, like: GPUArray
) -> tuple[GPUArray, int]:
    """Where a row kernel writes and the row stride there: out itself when its rows step with
    one stride and never overlap, else a fresh contiguous array (``deliver`` copies it to out)."""
    n = shape[-1] if shape else 1
    if out is not None:
        if out._dtype is not dt:
            raise TypeError(f"{op}: out is {out._dtype.name} but the result is {dt.name}")
        s = row_stride(out)
        if s is not None and (s >= n or out.size <= n):
            return out, s
    return empty(shape, dt, like._device), n


def deliver(y: GPUArray, out: GPUArray | None) -> GPUArray:
    """y, or out after copying y into it (an out= the kernel could not write in place)."""
    if out is None or y is out:
        return y
    out[...] = y
    return out


def served_as(op: str, x: GPUArray, rd: DataType) -> GPUArray:
    """x as an operand of a kernel that reads and writes ``rd``.

    x itself when it is of dtype rd. Otherwise x converted to rd by the routed cast op, which is
    exactly the conversion the Triton kernel makes in registers when rd is its own compute type
    (float32, float64, the integers): same values, one extra pass, only for mixed-dtype calls.
    A float16/bfloat16 result from another input dtype would round the input before computing,
    so it is refused (the ops layer never asks for it: half results come from half inputs).
    """
    if x._dtype is rd:
        return x
    if rd.name in _HALF or rd.kind not in ("f", "i", "u"):
        raise TypeError(
            f"{op}: the native kernel computes a {rd.name} result from {rd.name} inputs only, "
            f"got {x._dtype.name}"
        )
    return x.astype(rd)


def compute_name(rd: DataType) -> str:
    """The floating type a result of dtype rd is computed in (the NumPy backend's rule)."""
    return "float64" if rd.name == "float64" else "float32"
