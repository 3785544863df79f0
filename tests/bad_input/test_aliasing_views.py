"""Views whose elements share memory (broadcast, stride 0) are refused as write targets."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.filterwarnings("error")


def _src() -> gp.GPUArray:
    return gp.from_numpy(np.arange(1, 4, dtype=np.float32))


WRITES = [
    ("setitem scalar", lambda b: b.__setitem__(slice(None), 5.0)),
    ("setitem", lambda b: b.__setitem__((slice(None), 0), 5.0)),
    ("setitem", lambda b: b.__setitem__(Ellipsis, np.ones((4, 3), np.float32))),
    ("setitem", lambda b: b.__setitem__(Ellipsis, gp.ones((4, 3)))),
    ("fill", lambda b: b.fill_(0.0)),
    ("exp: out", lambda b: gp.exp(gp.ones((4, 3)), out=b)),
    ("add: out", lambda b: gp.add(gp.ones((4, 3)), 1.0, out=b)),
    ("mul: out", lambda b: gp.mul(gp.ones((4, 3)), gp.ones((4, 3)), out=b)),
    ("relu: out", lambda b: gp.relu(gp.ones((4, 3)), out=b)),
    ("softmax: out", lambda b: gp.softmax(gp.ones((4, 3)), out=b)),
    ("cast: out", lambda b: gp.cast(gp.ones((4, 3), "float16"), "float32", out=b)),
    ("bias_add: out", lambda b: gp.bias_add_inplace(b, gp.ones((3,)))),
    ("copy", lambda b: gp._memory.copy_into(b, gp.ones((4, 3)))),
]


@pytest.mark.parametrize(("what", "write"), WRITES)
def test_broadcast_view_is_not_a_write_target(what: str, write) -> None:  # type: ignore[no-untyped-def]
    src = _src()
    b = src.broadcast_to((4, 3))
    assert b.internal_overlap and not src.internal_overlap
    with pytest.raises(gp.OverlapError) as e:
        write(b)
    msg = str(e.value)
    assert msg.startswith(what.split(" ")[0]) and "shape (4" in msg and "stride 0" in msg
    np.testing.assert_array_equal(src.to_numpy(), [1, 2, 3])  # the source did not change
    np.testing.assert_array_equal(b.to_numpy(), np.tile([1, 2, 3], (4, 1)))
    out = gp.empty((4, 3))
    gp.exp(gp.ones((4, 3)), out=out)  # the next valid call works
    np.testing.assert_allclose(out.to_numpy(), np.e, rtol=1e-6)


@pytest.mark.parametrize(
    ("shape", "strides", "overlap"),
    [
        ((4, 3), (0, 1), True),
        ((3, 3), (1, 1), True),  # a sliding window: rows overlap
        ((2, 3), (3, 2), False),  # interleaved but disjoint (foreign strides)
        ((4, 3), (3, 1), False),
        ((2, 2), (-2, 1), False),
        ((1, 5), (0, 1), False),  # stride 0 along a dim of size 1 is harmless
    ],
)
def test_overlap_is_exact(shape, strides, overlap: bool) -> None:  # type: ignore[no-untyped-def]
    base = gp.zeros((16,))
    v = gp.GPUArray._make(base._buf, base._ptr, shape, strides, 4, base.dtype, base.device)
    assert v.internal_overlap is overlap
    if overlap:
        with pytest.raises(gp.OverlapError):
            v[...] = 1.0
        np.testing.assert_array_equal(base.to_numpy(), 0)
    else:
        v[...] = 1.0
        assert base.to_numpy().sum() == v.size


def test_plain_views_stay_writable() -> None:
    a = gp.zeros((4, 6))
    a[:, ::2] = 1.0
    a.T[1] = 2.0
    a.reshape(2, 12)[1, :3] = 3.0
    want = np.zeros((4, 6), np.float32)
    want[:, ::2] = 1
    want.T[1] = 2
    want.reshape(2, 12)[1, :3] = 3
    np.testing.assert_array_equal(a.to_numpy(), want)


def test_a_row_of_a_broadcast_is_an_ordinary_view() -> None:
    """torch's rule, not NumPy's read-only broadcast: a view of a broadcast that repeats no
    element (one row) is writable and writes its source, each element once; the broadcast
    itself, whose rows share those elements, stays refused."""
    src = _src()
    b = src.broadcast_to((4, 3))
    row = b[2]
    assert not row.internal_overlap and not row.readonly
    row[...] = np.array([7, 8, 9], np.float32)
    np.testing.assert_array_equal(src.to_numpy(), [7, 8, 9])
    with pytest.raises(gp.OverlapError):
        b[:2] = 0.0
