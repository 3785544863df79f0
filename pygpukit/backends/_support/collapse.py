"""Operands of an N-d map (elementwise, unary, activation, copy) collapsed jointly: every
operand broadcast to the output's shape, then pygpukit._layout.merge_dims drops size-1 dims and
merges neighbours that are contiguous in every operand at once, so a kernel sees few dims with
one stride each. When more dims remain than a kernel decomposes, the call splits along the
leading dim (``split_leading``): rare, it needs broadcasting that interleaves with the layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pygpukit import _layout
from pygpukit.array import GPUArray

__all__ = [
    "broadcast_strides",
    "contiguous_strides",
    "plan_nd",
    "reduce_axes",
    "reduce_view",
    "split_leading",
]


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


def reduce_axes(
    shape: tuple[int, ...], axis: Any, keepdims: bool
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the reduced axes, sorted and non-negative; the result's shape) of a reduction over
    ``axis`` (None: every axis; an int; a tuple or list of ints), keeping size-1 dims when
    ``keepdims``. The ops layer has checked the axes are in range."""
    nd = len(shape)
    if axis is None:
        axes = tuple(range(nd))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(sorted({int(a) % nd for a in axis}))
    else:
        axes = (int(axis) % nd,) if nd else ()
    if keepdims:
        return axes, tuple(1 if d in axes else n for d, n in enumerate(shape))
    return axes, tuple(n for d, n in enumerate(shape) if d not in axes)


def _group(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    rows = _layout.merge_dims(shape, strides)
    if not rows:
        return (0, 0) if 0 in shape else (1, 0)
    return (rows[0][0], rows[0][1]) if len(rows) == 1 else None


def reduce_view(
    x: GPUArray, axes: tuple[int, ...], contiguous: Callable[[GPUArray], GPUArray]
) -> tuple[GPUArray, list[tuple[int, int]]]:
    """x as three (size, stride) groups for a reduction over ``axes``: the kept dims before,
    the reduced dims, the kept dims after, each collapsed to one stride. Reduced axes that are
    not adjacent are permuted next to each other first; groups that do not collapse take one
    contiguous copy (the home's own ``contiguous``)."""
    nd = x.ndim
    if axes and axes != tuple(range(axes[0], axes[-1] + 1)):
        kept = [i for i in range(nd) if i not in axes]
        x = x.permute(kept + list(axes))
        axes = tuple(range(len(kept), nd))
    i, j = (axes[0], axes[-1] + 1) if axes else (nd, nd)
    for attempt in range(2):
        sh, st = x._shape, x._estrides
        groups = [_group(sh[:i], st[:i]), _group(sh[i:j], st[i:j]), _group(sh[j:], st[j:])]
        if all(g is not None for g in groups) or attempt:
            break
        x = contiguous(x)
    return x, groups  # type: ignore[return-value]
