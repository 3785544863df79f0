"""Pure shape/stride arithmetic shared by GPUArray views and the copy engine.

Strides here are in *elements* (DLPack's convention and what kernels take); GPUArray.strides
converts to bytes for NumPy-style callers.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

Shape = tuple[int, ...]


def as_shape(shape: Any, what: str = "shape") -> Shape:
    """Normalise an int or a sequence of ints; reject negatives and non-integers by name."""
    if type(shape) is tuple:  # the hot case: already a tuple of non-negative ints
        for d in shape:
            if type(d) is not int or d < 0:
                break
        else:
            return shape
    if isinstance(shape, int) and not isinstance(shape, bool):
        dims: Sequence[Any] = (shape,)
    elif isinstance(shape, (tuple, list)):
        dims = shape
    else:
        try:
            dims = tuple(shape)
        except TypeError:
            raise TypeError(
                f"{what} must be an int or a sequence of ints, got {type(shape).__name__}"
            ) from None
    out = []
    for d in dims:
        if isinstance(d, bool):
            raise TypeError(f"{what} {tuple(dims)!r} holds a bool")
        try:
            n = operator.index(d)
        except TypeError:
            raise TypeError(
                f"{what} {tuple(dims)!r} holds {d!r} of type {type(d).__name__}, not an int"
            ) from None
        if n < 0:
            raise ValueError(f"{what} {tuple(dims)!r} has a negative dimension")
        out.append(n)
    return tuple(out)


def contiguous_strides(shape: Shape) -> Shape:
    n = len(shape)
    if n == 1:
        return (1,)
    if n == 2:
        return (shape[1], 1)
    strides = [1] * n
    acc = 1
    for i in range(n - 1, -1, -1):
        strides[i] = acc
        acc *= shape[i]
    return tuple(strides)


def numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def is_contiguous(shape: Shape, strides: Shape) -> bool:
    """C-contiguous, ignoring the strides of size-1 dims (as torch and NumPy do)."""
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        n = shape[i]
        if n == 0:
            return True
        if n != 1 and strides[i] != acc:
            return False
        acc *= n
    return True


_EXACT_OVERLAP_LIMIT = 1 << 22  # elements; larger unusual layouts count as overlapping


def overlap_reason(shape: Shape, strides: Shape) -> str:
    """Why two elements of this layout share one address, or "" when none do.

    NumPy's solve_may_have_internal_overlap answers the same question. Layouts made by slicing,
    transposing and reshaping are nested (each stride, sorted by size, steps past everything the
    smaller ones reach) and are accepted at once; stride 0 along a dim of size > 1 (broadcast)
    always overlaps. Anything else (foreign strides) is checked element by element up to
    _EXACT_OVERLAP_LIMIT elements and counted as overlapping beyond that.
    """
    dims = [(abs(s), n, i) for i, (n, s) in enumerate(zip(shape, strides, strict=True)) if n > 1]
    for s, n, i in dims:
        if s == 0:
            return f"stride 0 along dim {i} of size {n}"
    reach = 0  # the largest offset the smaller strides reach
    for s, n, _ in sorted(dims):
        if s <= reach:
            break
        reach += (n - 1) * s
    else:
        return ""
    total = numel(shape)
    if total > _EXACT_OVERLAP_LIMIT:
        return f"strides {tuple(strides)} may overlap and {total} elements are too many to check"
    import numpy as np

    offsets = np.zeros((), dtype=np.int64)
    for n, s in zip(shape, strides, strict=True):
        offsets = offsets[..., None] + np.arange(n, dtype=np.int64) * s
    flat = offsets.reshape(-1)
    uniq, counts = np.unique(flat, return_counts=True)
    if counts.max(initial=1) <= 1:
        return ""
    k = int(np.argmax(counts > 1))
    return f"{int(counts[k])} elements sit at element offset {int(uniq[k])}"


def reshape_strides(shape: Shape, strides: Shape, new_shape: Shape) -> Shape | None:
    """Strides that view ``shape/strides`` as ``new_shape`` without a copy, or None if impossible.

    Groups old and new dims into runs of equal element count; each old run must be internally
    contiguous (stride[i] == stride[i+1] * shape[i+1]). This is NumPy's _attempt_nocopy_reshape.
    """
    if numel(shape) == 0:
        return contiguous_strides(new_shape)
    old = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    out = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(old) and ni < len(new_shape):
        o_end, n_end = oi + 1, ni + 1
        o_cnt, n_cnt = old[oi][0], new_shape[ni]
        while o_cnt != n_cnt:
            if o_cnt < n_cnt:
                o_cnt *= old[o_end][0]
                o_end += 1
            else:
                n_cnt *= new_shape[n_end]
                n_end += 1
        for k in range(oi, o_end - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        acc = old[o_end - 1][1]
        for k in range(n_end - 1, ni - 1, -1):
            out[k] = acc
            acc *= new_shape[k]
        oi, ni = o_end, n_end
    for k in range(ni, len(new_shape)):  # trailing size-1 dims
        out[k] = 1
    return tuple(out)


def infer_reshape(size: int, shape: Shape | tuple[Any, ...]) -> Shape:
    """Resolve one -1 in a requested shape; check the element count matches."""
    dims = list(shape)
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"reshape {tuple(shape)}: only one dimension may be -1")
    if any((d < 0 and d != -1) for d in dims):
        raise ValueError(f"reshape {tuple(shape)}: negative dimension")
    if unknown:
        rest = numel(tuple(d for d in dims if d != -1))
        if rest == 0 or size % rest:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        dims[unknown[0]] = size // rest
    if numel(tuple(dims)) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return tuple(dims)


def broadcast_shapes(*shapes: Shape) -> Shape:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, start=ndim - len(s)):
            if d == out[i] or d == 1:
                continue
            if out[i] == 1:
                out[i] = d
            else:
                raise ValueError(
                    f"shapes {', '.join(str(tuple(x)) for x in shapes)} cannot be broadcast"
                )
    return tuple(out)


def merge_dims(shape: Shape, *strides: Shape) -> list[tuple[int, ...]]:
    """Drop size-1 dims and merge neighbours that are jointly contiguous in every stride set.

    Returns rows ``(n, stride_a, stride_b, ...)`` outermost first; the copy engine plans on them.
    """
    rows: list[tuple[int, ...]] = []
    for i, n in enumerate(shape):
        if n == 1:
            continue
        st = tuple(s[i] for s in strides)
        if rows and all(rows[-1][k + 1] == st[k] * n for k in range(len(st))):
            rows[-1] = (rows[-1][0] * n, *st)
        else:
            rows.append((n, *st))
    return rows


def single_stride(shape: Shape, strides: Shape, default: int = 0) -> int | None:
    """The one stride that steps through ``shape`` in C order, or None when there is none.

    That is merge_dims(shape, strides) with at most one row: its stride (the innermost non-size-1
    dim's, 0 = broadcast) for one row, ``default`` for none (every dim has size 1), None for
    more. The native adapters ask this on every call, so it scans directly instead of building
    merge_dims' rows (about 3x slower for three dims); tests/test_layout.py checks the two agree.
    """
    step: int | None = None
    acc = 0
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n == 1:
            continue
        if step is None:
            step = s
        elif s != acc:
            return None
        acc = s * n
    return default if step is None else step


class BatchPlan(NamedTuple):
    """A strided-batched GEMM's cover of batch dims: ``loop`` (the outer dims the host loops
    over, see loop_offsets) times ``batch`` matrices per call, operand i stepping ``strides[i]``
    elements from one matrix to the next (0 = broadcast)."""

    loop: Shape
    batch: int
    strides: tuple[int, ...]


def plan_batches(lead: Shape, *strides: Shape) -> BatchPlan:
    """Loop over the fewest outer dims of ``lead`` that leave every operand (its batch strides,
    one set per operand) one stride through the rest (single_stride); those rest dims are the
    batch. Shared by the cuBLASLt (backends/native/matmul.py) and integer
    (backends/native/matmul_int.py) products."""
    p = 0
    while any(single_stride(lead[p:], s[p:]) is None for s in strides):
        p += 1
    inner = lead[p:]
    return BatchPlan(
        lead[:p], numel(inner), tuple(single_stride(inner, s[p:]) or 0 for s in strides)
    )


def loop_offsets(loop: Shape, *strides: Shape) -> Iterator[tuple[int, ...]]:
    """For each index of the looped dims ``loop`` in C order, the element offset of each stride
    set there (one all-zero tuple when there are no looped dims)."""
    for idx in itertools.product(*(range(v) for v in loop)):
        yield tuple(sum(i * s for i, s in zip(idx, st, strict=False)) for st in strides)
