"""Operands of an N-d map (elementwise, unary, activation, copy) collapsed jointly: every
operand broadcast to the output's shape, then pygpukit._layout.merge_dims drops size-1 dims and
merges neighbours that are contiguous in every operand at once, so a kernel sees few dims with
one stride each. When more dims remain than a kernel decomposes, the call splits along the
leading dim (``split_leading``): rare, it needs broadcasting that interleaves with the layout.
"""

from __future__ import annotations

from typing import Any

from pygpukit import _layout
from pygpukit.array import GPUArray

__all__ = ["broadcast_strides", "contiguous_strides", "plan_nd", "split_leading"]


def broadcast_strides(x: GPUArray, shape: tuple[int, ...]) -> tuple[int, ...]:
    """x's element strides as an operand of a ``shape`` output (0 along broadcast dims)."""
    if x._shape == shape:
        return x._estrides
    return x.broadcast_to(shape)._estrides


def plan_nd(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> list[tuple[int, ...]]:
    """merge_dims rows ``(n, stride_0, stride_1, ...)`` outermost first; at least one row."""
    rows = _layout.merge_dims(shape, *strides)
    return rows or [(1,) + (0,) * len(strides)]


def split_leading(operands: tuple[Any, ...], shape: tuple[int, ...], i: int) -> tuple[Any, ...]:
    """The operands of output row ``i`` along the leading dim (arrays broadcast to ``shape``
    first; scalars and None pass through)."""
    return tuple(
        (v if v._shape == shape else v.broadcast_to(shape))[i] if isinstance(v, GPUArray) else v
        for v in operands
    )


_contig: dict[tuple[int, ...], tuple[int, ...]] = {}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-contiguous element strides of ``shape`` (cached: launchers compare against them)."""
    st = _contig.get(shape)
    if st is None:
        st = _layout.contiguous_strides(shape) if shape else ()
        if len(_contig) > 4096:
            _contig.clear()
        _contig[shape] = st
    return st
