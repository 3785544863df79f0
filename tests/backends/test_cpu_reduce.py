"""NumPy backend: sum, mean, max, min, argmax."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from pygpukit.backends import cpu

CASES = [
    ((1,), None),
    ((4097,), None),
    ((7, 33), 0),
    ((7, 33), 1),
    ((3, 5, 7), -1),
    ((3, 5, 7), (0, 2)),
]


def _fsum(x: np.ndarray, axis: object) -> np.ndarray:
    """Exactly rounded float64 sums via math.fsum along the reduced axes."""
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = tuple(a % x.ndim for a in axes)
    keep = [a for a in range(x.ndim) if a not in axes]
    moved = np.moveaxis(x, keep, list(range(len(keep))))
    flat = moved.reshape([x.shape[a] for a in keep] + [-1])
    return np.apply_along_axis(math.fsum, -1, flat) if flat.ndim > 1 else np.array(math.fsum(flat))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape_axis", CASES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_mean(shape_axis: tuple, dtype: str, keepdims: bool) -> None:
    shape, axis = shape_axis
    x = rand(np.random.default_rng(seed("sum", shape, axis, dtype)), shape, dtype, positive=True)
    ref = _fsum(as64(x), axis)
    n = x.size // max(ref.size, 1)
    ref_shape = np.sum(np.empty(shape), axis=axis, keepdims=keepdims).shape
    out = cpu.sum(x, axis=axis, keepdims=keepdims)
    assert out.dtype == np_dtype(dtype) and out.shape == ref_shape
    assert_close(out, ref.reshape(ref_shape), dtype)
    out = cpu.mean(x, axis=axis, keepdims=keepdims)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, (ref / n).reshape(ref_shape), dtype)


def test_half_sum_accumulates_in_float32() -> None:
    # 8192 ones: a float16 accumulator would stop at 2048 (2048 + 1 rounds back to 2048).
    x = np.ones(8192, np.float16)
    assert cpu.sum(x)[()] == 8192
    b = np.full(4097, 0.1, ml_dtypes.bfloat16)
    assert_close(cpu.sum(b), np.array(4097 * as64(b)[0]), "bfloat16")


def test_int_and_bool_sum_give_int64() -> None:
    x = np.full(100, 2**30, np.int32)  # overflows int32, not int64
    out = cpu.sum(x)
    assert out.dtype == np.int64 and out[()] == 100 * 2**30
    assert cpu.sum(np.array([True, True, False]))[()] == 2
    m = cpu.mean(np.array([1, 2], np.int32))
    assert m.dtype == np.float32 and m[()] == 1.5


@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
@pytest.mark.parametrize("shape_axis", CASES, ids=str)
def test_max_min(shape_axis: tuple, dtype: str) -> None:
    shape, axis = shape_axis
    x = rand(np.random.default_rng(seed("max", shape, axis, dtype)), shape, dtype)
    x64 = as64(x)
    for fn, ref_fn in ((cpu.max, np.amax), (cpu.min, np.amin)):
        out = fn(x, axis=axis)
        assert out.dtype == np_dtype(dtype)
        # max/min select an element: exact.
        np.testing.assert_array_equal(as64(out), ref_fn(x64, axis=axis))


def test_max_nan_and_empty() -> None:
    x = np.array([1.0, np.nan, 3.0], np.float32)
    assert np.isnan(cpu.max(x)[()]) and np.isnan(cpu.min(x)[()])
    with pytest.raises(ValueError, match="empty"):
        cpu.max(np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
def test_argmax(dtype: str) -> None:
    x = rand(np.random.default_rng(seed("argmax", dtype)), (33, 7), dtype)
    out = cpu.argmax(x)
    assert out.dtype == np.int64 and out.shape == ()
    assert as64(x).ravel()[int(out)] == as64(x).max()
    out = cpu.argmax(x, axis=0, keepdims=True)
    assert out.shape == (1, 7)
    np.testing.assert_array_equal(out[0], [int(np.argmax(as64(x)[:, j])) for j in range(7)])


def test_argmax_first_occurrence_and_nan() -> None:
    assert cpu.argmax(np.array([1.0, 5.0, 5.0, 2.0], np.float16))[()] == 1
    assert cpu.argmax(np.array([1.0, np.nan, 5.0, np.nan], np.float32))[()] == 1
    assert cpu.argmax(np.array([[0, 3, 3], [9, 9, 1]], np.int32), axis=1).tolist() == [1, 0]


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float32,
        array_shapes(min_dims=1, max_dims=3, max_side=9),
        elements=st.integers(-4, 4).map(float),  # small ints: many ties
    ),
    st.data(),
)
def test_argmax_agrees_with_numpy(x: np.ndarray, data: st.DataObject) -> None:
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    for dtype in (np.float32, ml_dtypes.bfloat16, np.int32):
        np.testing.assert_array_equal(
            cpu.argmax(x.astype(dtype), axis=axis), np.argmax(x, axis=axis)
        )
