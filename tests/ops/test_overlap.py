"""out= and setitem targets that overlap an input give NumPy's answer: as if every input were
read before out is written.

Exactly in place (out is the input, x += y) the element-by-element kernels write directly; any
other overlap (shifted, transposed, broadcast, a product or a row op into its own input) goes
through a fresh result copied into out. On the GPU the shifted cases race without that (blocks
read elements that other blocks already wrote), so the arrays are large enough to span many
blocks. Runs on DEVICE (tests/ops/_helpers.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.routing import dispatch
from tests.ops._helpers import DEVICE, up

N = 1 << 20
RNG = np.random.default_rng(0)


def _vec() -> np.ndarray:
    return RNG.standard_normal(N).astype(np.float32)


def _mat(n: int = 96) -> np.ndarray:
    return RNG.standard_normal((n, n)).astype(np.float32)


# (name, host data, what NumPy does to x, the same on a GPUArray x, the path expected:
# "fresh": the backend is given no out and its result is copied into out; "direct": it writes
# out itself; "copy first": setitem copies the overlapping source before writing)
CASES: list[tuple[str, Any, Any, Any, str]] = [
    ("add shifted right", _vec, lambda x: np.add(x[:-1], 1, out=x[1:]),
     lambda x: gp.add(x[:-1], 1.0, out=x[1:]), "fresh"),
    ("exp shifted left", _vec, lambda x: np.exp(x[1:], out=x[:-1]),
     lambda x: gp.exp(x[1:], out=x[:-1]), "fresh"),
    ("mul by its reverse half", _vec, lambda x: np.multiply(x[: N // 2], x[N // 2 - 7 : N - 7],
     out=x[3 : N // 2 + 3]), lambda x: gp.mul(x[: N // 2], x[N // 2 - 7 : N - 7],
     out=x[3 : N // 2 + 3]), "fresh"),
    ("setitem shifted right", _vec, lambda x: x.__setitem__(slice(1, None), x[:-1]),
     lambda x: x.__setitem__(slice(1, None), x[:-1]), "copy first"),
    ("setitem shifted left", _vec, lambda x: x.__setitem__(slice(None, -1), x[1:]),
     lambda x: x.__setitem__(slice(None, -1), x[1:]), "copy first"),
    ("setitem from the other half", _vec, lambda x: x.__setitem__(slice(None, N // 2), x[N // 2 :]),
     lambda x: x.__setitem__(slice(None, N // 2), x[N // 2 :]), "direct"),
    ("add transposed into itself", _mat, lambda x: np.add(x.T, x, out=x),
     lambda x: gp.add(x.T, x, out=x), "fresh"),
    ("add a broadcast row of out", _mat, lambda x: np.add(x, x[5], out=x),
     lambda x: gp.add(x, x[5], out=x), "fresh"),
    ("matmul into its left operand", _mat, lambda x: np.matmul(x, x.T.copy(), out=x),
     lambda x: gp.matmul(x, x.T.copy(), out=x), "fresh"),
    ("softmax in place", _mat, lambda x: x.__setitem__(Ellipsis, _softmax(x)),
     lambda x: gp.softmax(x, out=x), "fresh"),
    ("in place add", _vec, lambda x: np.add(x, x, out=x), lambda x: gp.add(x, x, out=x),
     "direct"),
]  # fmt: skip


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("name", "data", "host", "dev", "path"), CASES, ids=[c[0] for c in CASES])
def test_overlapping_out_matches_numpy(
    name: str, data: Any, host: Any, dev: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = data()
    g = up(x)
    given: list[bool] = []  # whether the routed op's backend was handed an out
    copies = [0]
    select, copy = dispatch.select, gp.GPUArray.copy

    def spy(op: str, *a: Any) -> Any:
        backend, impl = select(op, *a)

        def wrapped(*inputs: Any, out: Any = None, **p: Any) -> Any:
            if op in ("add", "exp", "mul", "matmul", "softmax"):
                given.append(out is not None)
            return impl(*inputs, out=out, **p)

        return backend, wrapped

    def counted(self: gp.GPUArray) -> gp.GPUArray:
        copies[0] += 1
        return copy(self)

    monkeypatch.setattr(dispatch, "select", spy)
    monkeypatch.setattr(gp.GPUArray, "copy", counted)
    host(x)
    dev(g)
    monkeypatch.undo()
    tol = 1e-5 if "matmul" not in name else 1e-4
    np.testing.assert_allclose(g.to_numpy(), x, rtol=tol, atol=tol)
    if name.startswith("setitem"):
        assert copies[0] == (1 if path == "copy first" else 0)
    else:
        assert given == [path == "direct"]


def test_only_a_clash_costs_a_fresh_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend gets out itself unless out overlaps an input otherwise than in place."""
    seen: list[bool] = []  # add and softmax calls only (copies route too on the GPU)
    select = dispatch.select

    def spy(op: str, *a: Any) -> Any:
        backend, impl = select(op, *a)

        def wrapped(*inputs: Any, out: Any = None, **p: Any) -> Any:
            if op in ("add", "softmax"):
                seen.append(out is None)
            return impl(*inputs, out=out, **p)

        return backend, wrapped

    monkeypatch.setattr(dispatch, "select", spy)
    x = gp.arange(12, dtype="float32", device=DEVICE).reshape(3, 4)
    other = gp.ones((3, 4), device=DEVICE)
    gp.add(x, other, out=x)  # exactly in place: direct
    gp.add(other, 1.0, out=x)  # disjoint: direct
    gp.add(x[:, 1:], 1.0, out=x[:, :-1])  # shifted: fresh
    gp.softmax(x, out=x)  # a row op into its input: fresh
    gp.add(x[::2], 1.0, out=x[1:2].broadcast_to((2, 4)).copy())  # a copy is disjoint
    assert seen == [False, False, True, True, False]


def test_may_share_memory_by_byte_range() -> None:
    from pygpukit._memory import may_share_memory, same_view

    y = gp.arange(12, dtype="float32", device=DEVICE).reshape(3, 4)
    assert may_share_memory(y[:, ::2], y[:, 1::2])  # interleaved: counted as sharing, as NumPy
    assert not may_share_memory(y[0], y[1])
    assert may_share_memory(y.T, y) and not same_view(y.T, y)
    assert same_view(y, y.reshape(3, 4)) and not same_view(y[:2], y[1:])
    assert not may_share_memory(y[:0], y)  # empty views share nothing
    q = gp.from_numpy(np.zeros((4, 8), np.int8), dtype="int4", device=DEVICE)
    assert may_share_memory(q[::2], q[2:3])  # row 2 is in both (two values a byte)
    assert not may_share_memory(q[0:1], q[1:2])


def test_may_share_memory_across_owners() -> None:
    """Two pool allocations never overlap (the fast path); an array imported from another
    owner (here DLPack of y itself) is compared by its bytes, so an alias of y is found."""
    from pygpukit._memory import may_share_memory

    y = gp.arange(12, dtype="float32", device=DEVICE).reshape(3, 4)
    z = gp.zeros((3, 4), device=DEVICE)
    assert not may_share_memory(y, z) and not may_share_memory(z, y)
    alias = gp.from_dlpack(y)
    assert alias._buf is not y._buf  # another owner: the byte ranges decide
    assert may_share_memory(alias, y) and may_share_memory(y[2], alias)
    assert not may_share_memory(alias[0], y[1])
    assert not may_share_memory(alias, z)
    # and out= over such an alias still gives NumPy's answer
    ref = y.to_numpy()
    gp.add(alias[:, :-1], 1.0, out=y[:, 1:])
    ref[:, 1:] = ref[:, :-1] + 1
    np.testing.assert_array_equal(y.to_numpy(), ref)
