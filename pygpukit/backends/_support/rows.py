"""Arrays read and written as rows of their last dim: norms, softmax, rope, activations,
embedding.

Two addressing schemes, one per kernel kind:

- One row stride (``row_stride``, ``in_rows``, ``out_rows``, ``as_rows``): the last dim
  contiguous and consecutive rows one element stride apart, flat over the leading dims. That is
  the layout of the common cases, read in place: contiguous arrays, the gate/up halves of a fused
  projection, every other row, a row-strided out=. The native kernels take this form; anything
  else is copied first (``contiguous()``), and an out= of another layout receives a copy.
- Up to MAX_LEAD collapsed leading dims (``plan_rows``, ``row_view``): flat row r decomposes
  over three dims with div/mod, so a [B, S, H, D] view with independent strides is read in
  place. The Triton row kernels take this form.
"""

from __future__ import annotations

from collections.abc import Callable

from pygpukit import _layout
from pygpukit._layout import single_stride
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType

__all__ = [
    "MAX_LEAD",
    "as_2d",
    "as_rows",
    "in_rows",
    "out_rows",
    "plan_rows",
    "row_stride",
    "row_view",
    "rows_of",
]

# Leading dims of row kernels that decompose rows (Triton); more -> a contiguous copy first.
MAX_LEAD = 3


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


def rows_of(x: GPUArray) -> tuple[int, int, int] | None:
    """(rows, n, row_stride) when x reads as distinct rows of its last dim (row_stride, and rows
    that neither overlap nor repeat); None otherwise."""
    s = row_stride(x)
    if s is None:
        return None
    n = x._shape[-1] if x._shape else 1
    rows = x.size // n if n else 0
    if any(d != 1 for d in x._shape[:-1]) and (s < n or s <= 0):
        return None
    return rows, n, s


def as_rows(x: GPUArray) -> tuple[GPUArray, int, int, int]:
    """x (or its contiguous copy) with its (rows, n, row_stride)."""
    got = rows_of(x)
    if got is None:
        x = x.contiguous()
        got = rows_of(x)
        assert got is not None
    return (x, *got)


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


def plan_rows(
    lead: tuple[int, ...], strides: tuple[tuple[int, ...], ...]
) -> tuple[list[int], list[list[int]]] | None:
    """Row addressing for a [*lead, N] operand set: ([R, D1, D2], per-operand [s0, s1, s2]).

    Flat row r decomposes as i2 = r % D2, i1 = (r // D2) % D1, i0 = r // (D1 * D2); operand k's
    row starts at i0*s0 + i1*s1 + i2*s2. None when the lead dims do not collapse to MAX_LEAD.
    """
    if len(lead) == 1:  # the hot case: [M, N]
        return [lead[0], 1, 1], [[s[0], 0, 0] for s in strides]
    rows = _layout.merge_dims(lead, *strides)
    if len(rows) > MAX_LEAD:
        return None
    rows = [(1,) + (0,) * len(strides)] * (MAX_LEAD - len(rows)) + rows
    n = 1
    for r in rows:
        n *= r[0]
    return [n, rows[1][0], rows[2][0]], [[r[k + 1] for r in rows] for k in range(len(strides))]


def row_view(x: GPUArray, *others: GPUArray | None) -> tuple[list[int], list[list[int]]] | None:
    """plan_rows over the leading dims of x and of the same-shaped operands in ``others``
    (None entries get zero strides); the last-dim strides are appended to each stride list."""
    if x.ndim == 2:  # the hot case, without the general planner
        return [x._shape[0], 1, 1], [
            [0, 0, 0, 0] if o is None else [o._estrides[0], 0, 0, o._estrides[1]]
            for o in (x, *others)
        ]
    lead = x.shape[:-1]
    ops = [o for o in (x, *others) if o is not None]
    plan = plan_rows(lead or (1,), tuple(o._estrides[:-1] or (0,) for o in ops))
    if plan is None:
        return None
    sizes, st = plan
    res = []
    k = 0
    for o in (x, *others):
        if o is None:
            res.append([0, 0, 0, 0])
        else:
            res.append([*st[k], o._estrides[-1] if o.ndim else 1])
            k += 1
    return sizes, res


def as_2d(
    x: GPUArray, contiguous: Callable[[GPUArray], GPUArray]
) -> tuple[GPUArray, int, int, int, int]:
    """(x or ``contiguous(x)``, R, C, row stride, column stride) of x's [R, C] view: the leading
    dims collapsed into R when they step with one stride (quantize/dequantize read any column
    stride), else a contiguous copy made by the home's own ``contiguous``."""
    c = x._shape[-1]
    lead = x._shape[:-1]
    rows = 1
    for n in lead:
        rows *= n
    if not lead:
        return x, 1, c, 0, x._estrides[-1]
    sr = single_stride(lead, x._estrides[:-1])
    if sr is None:
        x = contiguous(x)
        return x, rows, c, c, 1
    return x, rows, c, sr, x._estrides[-1]
