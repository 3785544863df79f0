"""pygpukit._layout's stride helpers against brute force, on random shapes and strides.

The native adapters (pygpukit/backends/native/) plan kernel arguments with
these helpers; their GPU tests cover the launches, these cover the arithmetic on any machine:
non-contiguous and negative-step views, size-1 and size-0 dims, broadcast (zero) strides, and
arbitrary integer strides.
"""

from __future__ import annotations

import numpy as np
import pytest
from _data import seed

from pygpukit import _layout

Case = tuple[tuple[int, ...], tuple[int, ...]]


def _view_case(rng: np.random.Generator) -> Case:
    """Shape and element strides of a real NumPy view: slices (negative steps too), a
    permutation, size-1 dims and broadcast dims."""
    nd = int(rng.integers(0, 5))
    base = np.empty(tuple(int(rng.choice([1, 2, 3, 4, 6])) for _ in range(nd)), np.int32)
    idx = []
    for n in base.shape:
        step = int(rng.choice([1, 1, 1, 2, -1, -2]))
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n + 1))
        if step > 0:
            idx.append(slice(lo, hi, step))
        else:  # from hi - 1 down to the start (the whole dim when the range is empty)
            idx.append(slice(hi - 1 if hi > lo else None, None, step))
    v = base[tuple(idx)] if nd else base
    if nd > 1 and rng.random() < 0.5:
        v = v.transpose(tuple(rng.permutation(nd)))
    if rng.random() < 0.3:  # broadcast: new leading dims and size-1 dims stretched (stride 0)
        lead = tuple(int(rng.choice([1, 2, 3])) for _ in range(int(rng.integers(1, 3))))
        shape = lead + tuple(n if n != 1 else int(rng.choice([1, 3])) for n in v.shape)
        v = np.broadcast_to(v, shape)
    return v.shape, tuple(s // v.itemsize for s in v.strides)


def _raw_case(rng: np.random.Generator) -> Case:
    """Any shape (size 0 and 1 dims included) with any strides, chained ones half the time."""
    nd = int(rng.integers(0, 6))
    shape = tuple(int(rng.choice([0, 1, 1, 2, 3, 5, 7])) for _ in range(nd))
    strides = [int(rng.integers(-12, 40)) for _ in range(nd)]
    if nd and rng.random() < 0.5:  # strides that chain from a random inner step
        acc = int(rng.choice([0, 1, 3, -2]))
        for i in range(nd - 1, -1, -1):
            if rng.random() < 0.85:
                strides[i] = acc
            acc = strides[i] * shape[i]
    return shape, tuple(strides)


def _cases(tag: str, n: int = 3000) -> list[Case]:
    rng = np.random.default_rng(seed("layout", tag))
    fixed: list[Case] = [
        ((), ()),
        ((1, 1), (7, -3)),
        ((0,), (5,)),
        ((0, 3), (5, 1)),
        ((3, 0), (0, 9)),
        ((2, 3), (0, 0)),
        ((2, 3), (3, 1)),
        ((2, 1, 3), (3, 99, 1)),
        ((2, 3), (-3, -1)),
        ((4, 2), (1, 4)),
    ]
    return fixed + [(_view_case if i % 2 else _raw_case)(rng) for i in range(n)]


def _offsets(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """Element offsets of every index in C order."""
    if not shape:
        return [0]
    idx = np.indices(shape).reshape(len(shape), -1)
    return [int(o) for o in np.asarray(strides, np.int64) @ idx]


def _brute_single(shape: tuple[int, ...], strides: tuple[int, ...], default: int) -> int | None:
    """The step t with offset(flat index f) == f * t for every element, from the offsets."""
    offs = _offsets(shape, strides)
    if len(offs) == 1:
        return default
    t = offs[1] - offs[0]
    return t if all(o == f * t for f, o in enumerate(offs)) else None


def _from_merge(shape: tuple[int, ...], strides: tuple[int, ...], default: int) -> int | None:
    rows = _layout.merge_dims(shape, strides)
    if len(rows) > 1:
        return None
    return rows[0][1] if rows else default


@pytest.mark.parametrize("default", [0, 1, 7])
def test_single_stride_matches_brute_force_and_merge_dims(default: int) -> None:
    seen = {"none": 0, "zero": 0, "neg": 0, "pos": 0, "empty": 0}
    for shape, strides in _cases(f"single-{default}"):
        got = _layout.single_stride(shape, strides, default)
        assert got == _from_merge(shape, strides, default), (shape, strides)
        if 0 not in shape:  # an empty array has no offsets to check; merge_dims defines it
            assert got == _brute_single(shape, strides, default), (shape, strides)
        else:
            seen["empty"] += 1
        kind = "none" if got is None else "zero" if got == 0 else "neg" if got < 0 else "pos"
        seen[kind] += 1
    assert min(seen.values()) >= 30, seen  # every kind of answer was exercised


def test_single_stride_examples() -> None:
    assert _layout.single_stride((), ()) == 0
    assert _layout.single_stride((1, 1), (5, 9), default=4) == 4
    assert _layout.single_stride((2, 3), (3, 1)) == 1
    assert _layout.single_stride((2, 1, 3), (6, 123, 2)) == 2
    assert _layout.single_stride((2, 3), (4, 1)) is None  # padded rows
    assert _layout.single_stride((3, 4), (1, 3)) is None  # transposed
    assert _layout.single_stride((2, 3), (0, 0)) == 0  # broadcast
    assert _layout.single_stride((2, 3), (-3, -1)) == -1  # reversed
    with pytest.raises(ValueError):
        _layout.single_stride((2, 3), (1,))


def _brute_plan(lead: tuple[int, ...], *strides: tuple[int, ...]) -> _layout.BatchPlan:
    """The first split p whose inner dims every operand walks with one step (from offsets)."""
    for p in range(len(lead) + 1):
        inner = lead[p:]
        if 0 in inner:  # no offsets to walk: merge_dims' rows decide
            steps = [_from_merge(inner, s[p:], 0) for s in strides]
        else:
            steps = [_brute_single(inner, s[p:], 0) for s in strides]
        known = tuple(t for t in steps if t is not None)
        if len(known) == len(steps):
            return _layout.BatchPlan(lead[:p], int(np.prod(inner)), known)
    raise AssertionError("unreachable: no inner dims always plan")


def _batch_case(rng: np.random.Generator) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Batch dims and 2-3 operands' batch strides over them (views, broadcasts, raw strides)."""
    shape, first = (_view_case if rng.random() < 0.5 else _raw_case)(rng)
    sets = [first]
    for _ in range(int(rng.integers(1, 3))):
        if rng.random() < 0.5:
            sets.append(tuple(_layout.contiguous_strides(shape)) if shape else ())
        else:
            sets.append(tuple(int(x) for x in rng.integers(-6, 30, len(shape))))
        if shape and rng.random() < 0.4:  # broadcast along some dims (stride 0)
            sets[-1] = tuple(0 if rng.random() < 0.5 else s for s in sets[-1])
    return shape, sets


def test_plan_batches_matches_brute_force() -> None:
    rng = np.random.default_rng(seed("layout", "plan"))
    looped = multi = 0
    for _ in range(3000):
        lead, sets = _batch_case(rng)
        plan = _layout.plan_batches(lead, *sets)
        assert plan == _brute_plan(lead, *sets), (lead, sets)
        looped += bool(plan.loop)
        multi += len(lead) - len(plan.loop) > 1 and plan.batch > 1  # several dims per call
        # Every batch matrix, in C order, is met once: outer offsets plus t * stride.
        inner = lead[len(plan.loop) :]
        want = [_offsets(lead, s) if 0 not in lead else [] for s in sets]
        got: list[list[int]] = [[] for _ in sets]
        for base in _layout.loop_offsets(plan.loop, *sets):
            assert len(base) == len(sets)
            for j, b in enumerate(base):
                got[j] += [b + t * plan.strides[j] for t in range(plan.batch)]
        if 0 not in lead:
            assert got == want, (lead, sets, plan)
        assert plan.batch == int(np.prod(inner))
    assert looped >= 300 and multi >= 300, (looped, multi)


def test_plan_batches_examples() -> None:
    # Broadcast a over a contiguous b: one call, a stepping 0.
    assert _layout.plan_batches((4, 3), (0, 0), (3, 1)) == ((), 12, (0, 1))
    # Both contiguous over [2, 3]: a's matrix of 35 elements, b's of 10.
    assert _layout.plan_batches((2, 3), (105, 35), (30, 10)) == ((), 6, (35, 10))
    # a's outer dim padded: the host loops over it, 3 matrices per call.
    assert _layout.plan_batches((2, 3), (200, 35), (30, 10)) == ((2,), 3, (35, 10))
    assert list(_layout.loop_offsets((2,), (200, 35), (30, 10), (6, 1))) == [
        (0, 0, 0),
        (200, 30, 6),
    ]
    # No batch dims, or only size-1 ones: one matrix, one call.
    assert _layout.plan_batches((), (), ()) == ((), 1, (0, 0))
    assert _layout.plan_batches((1, 1), (9, 4), (5, 5)) == ((), 1, (0, 0))
    assert list(_layout.loop_offsets((), (), ())) == [(0, 0)]
    # A transposed batch (neither order steps uniformly) loops over everything but the last.
    assert _layout.plan_batches((3, 4), (1, 3), (4, 1)) == ((3,), 4, (3, 1))
