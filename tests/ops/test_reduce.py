"""Public reductions on the test device (ops._helpers.DEVICE, CPU by default): sum, sum_axis, mean,
max, min, argmax."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

AXES = [None, 0, 1, -1, (0, 1)]


def _fsum(x: np.ndarray, axis: object, keepdims: bool) -> np.ndarray:
    # Exactly rounded reference sums; the tests use 2-D arrays.
    if axis is None or axis == (0, 1):
        r = np.array(math.fsum(x.ravel()))
        return r.reshape(1, 1) if keepdims else r
    ax = int(axis) % 2  # type: ignore[call-overload]
    r = np.array([math.fsum(v) for v in np.moveaxis(x, ax, 0).T])
    return np.expand_dims(r, ax) if keepdims else r


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_mean(axis: object, dtype: str, layout: str, keepdims: bool) -> None:
    a = rand(
        np.random.default_rng(seed("sum", axis, dtype, layout)), (33, 65), dtype, positive=True
    )
    ref = _fsum(as64(a), axis, keepdims)
    r = gp.sum(view(a, layout), axis, keepdims)
    assert r.dtype is gp.as_dtype(dtype) and r.shape == ref.shape
    assert_close(r, ref, dtype)
    n = a.size // ref.size
    out = poisoned(ref.shape, dtype)
    assert gp.mean(view(a, layout), axis=axis, keepdims=keepdims, out=out) is out
    assert_close(out, ref / n, dtype)


def test_sum_axis_and_int_sum() -> None:
    a = rand(np.random.default_rng(1), (7, 33), "float32", positive=True)
    assert_close(gp.sum_axis(up(a), 1), _fsum(as64(a), 1, False), "float32")
    assert_close(gp.sum_axis(up(a), 0, keepdims=True), _fsum(as64(a), 0, True), "float32")
    i = np.full((3, 1000), 2**30, np.int32)
    r = gp.sum(up(i))
    assert r.dtype is gp.int64 and r.shape == () and int(r.item()) == 3000 * 2**30
    assert gp.mean(up(np.array([1, 2], np.int32))).dtype is gp.float32
    assert int(gp.sum(up(np.array([True, True, False]))).item()) == 2


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("axis", [None, 0, -1], ids=str)
def test_max_min_argmax(axis: int | None, dtype: str, layout: str) -> None:
    a = rand(np.random.default_rng(seed("max", axis, dtype, layout)), (33, 7), dtype)
    x64 = as64(a)
    for op, ref in (("max", np.max), ("min", np.min)):
        r = getattr(gp, op)(view(a, layout), axis)
        assert r.dtype is gp.as_dtype(dtype)
        np.testing.assert_array_equal(as64(r.to_numpy()), ref(x64, axis=axis))
    shape = np.argmax(x64, axis=axis).shape
    out = poisoned(shape, "int64")
    r = gp.argmax(view(a, layout), axis, out=out)
    assert r is out and r.dtype is gp.int64
    np.testing.assert_array_equal(r.to_numpy(), np.argmax(x64, axis=axis))


def test_argmax_ties_and_keepdims() -> None:
    x = up(np.array([[1.0, 7.0, 7.0], [3.0, 3.0, 0.0]], np.float16))
    assert gp.argmax(x, axis=1).to_numpy().tolist() == [1, 0]
    assert gp.argmax(x, axis=1, keepdims=True).shape == (2, 1)
    assert int(gp.argmax(x).item()) == 1


def test_errors() -> None:
    x = up(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="sum: axis 2 is out of range for an array of 2 dims"):
        gp.sum(x, 2)
    with pytest.raises(ValueError, match=r"mean: axis \(1, -1\) repeats an axis"):
        gp.mean(x, (1, -1))
    with pytest.raises(TypeError, match="argmax: axis must be an int or None"):
        gp.argmax(x, (0, 1))
    with pytest.raises(
        ValueError, match=r"max: cannot reduce an empty axis \(x has shape \(0, 3\)"
    ):
        gp.max(up(np.ones((0, 3), np.float32)))
    with pytest.raises(ValueError, match=r"sum: out has shape \(3,\).*result has shape \(2,\)"):
        gp.sum(x, 1, out=gp.empty((3,), device=DEVICE))
    with pytest.raises(TypeError, match="sum_axis: axis must be an int"):
        gp.sum_axis(x, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="min: x must be a GPUArray"):
        gp.min(np.ones(3))
