"""Triton reductions (sum, mean, max, min, argmax) against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS64, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import reduce as red

# (shape, axis): full, each axis, tuples (adjacent and not), primes; (20011,) and (3, 9001)
# are long enough to take the split-K (two-launch) path.
CASES = [
    ((1,), None),
    ((7,), 0),
    ((4097,), None),
    ((20011,), None),
    ((7, 33), None),
    ((7, 33), 0),
    ((7, 33), 1),
    ((7, 33), -1),
    ((3, 9001), 1),
    ((9001, 3), 0),
    ((3, 5, 7), (0, 2)),
    ((3, 5, 7), (1, 2)),
    ((3, 5, 7), 1),
]


def _sum_ref(x: np.ndarray, axis: object, keepdims: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exact (fsum) sums and the sum of |x| per output, the scale of the rounding error."""
    ax = tuple(range(x.ndim)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    ax = tuple(a % x.ndim for a in ax)
    moved = np.moveaxis(x, ax, tuple(range(-len(ax), 0)))
    rows = moved.reshape(*moved.shape[: x.ndim - len(ax)], -1)
    s = np.apply_along_axis(math.fsum, -1, rows) if rows.size else np.zeros(rows.shape[:-1])
    a = np.abs(rows).sum(-1)
    if keepdims:
        shape = [1 if i in ax else n for i, n in enumerate(x.shape)]
        s, a = np.reshape(s, shape), np.reshape(a, shape)
    return np.asarray(s), np.asarray(a)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_sum_mean(device: str, dtype: str, shape: tuple, axis: object, keepdims: bool) -> None:
    rng = np.random.default_rng(seed("sum", dtype, shape, axis))
    x = rand(rng, shape, dtype)
    ref, mag = _sum_ref(as64(x), axis, keepdims)
    s = red.sum(view(x, "transposed", device), axis=axis, keepdims=keepdims)
    assert s.dtype is gp.as_dtype(dtype) and s.shape == np.shape(ref)
    _check_sum(s, ref, mag, dtype)
    cnt = as64(x).size / max(np.size(ref), 1)
    m = red.mean(up(x, device), axis=axis, keepdims=keepdims)
    assert m.dtype is gp.as_dtype(dtype) and m.shape == np.shape(ref)
    _check_sum(m, ref / cnt, mag / cnt, dtype)


def _check_sum(out: gp.GPUArray, ref: np.ndarray, mag: np.ndarray, dtype: str) -> None:
    """|out - ref| <= bound * (sum |x| + |ref|): a sum of signed terms may cancel to ~0, so the
    error is measured against the magnitude of the terms (the accumulator's rounding error
    scale) plus the final rounding to the result dtype."""
    bound = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1e-2, "float64": 1e-14}[dtype]
    o = as64(out.to_numpy())
    assert np.isfinite(o).all(), "non-finite sums"
    err = np.abs(o - ref)
    lim = bound * (mag + np.abs(ref))
    assert (err <= lim).all(), f"max err {err.max():.3e}, worst ratio {(err / lim).max():.2f}"


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize("op", ["max", "min", "argmax"])
@pytest.mark.parametrize("dtype", [*FLOATS64, "int32"])
def test_extremes(device: str, dtype: str, op: str, shape: tuple, axis: object, keepdims: bool):
    if op == "argmax" and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    rng = np.random.default_rng(seed("ext", op, dtype, shape, axis))
    x = rand(rng, shape, dtype, low=-5, high=5)  # small ints: many ties (first index wins)
    out = poisoned(
        np.shape(getattr(cpu, op)(x, axis=axis, keepdims=keepdims)),
        "int64" if op == "argmax" else dtype,
        device,
    )
    r = getattr(red, op)(view(x, "strided", device), axis=axis, keepdims=keepdims, out=out)
    assert r is out
    np.testing.assert_array_equal(r.to_numpy(), getattr(cpu, op)(x, axis=axis, keepdims=keepdims))


def test_nan_and_inf(device: str) -> None:
    x = rand(np.random.default_rng(1), (4, 20011), "float32")
    x[1, 17] = x[1, 19000] = np.nan
    x[2, :] = -np.inf
    x[3, 5000] = np.inf
    for op in ("max", "min", "argmax", "sum"):
        for axis in (None, 1):
            r = getattr(red, op)(up(x, device), axis=axis).to_numpy()
            ref = getattr(cpu, op)(x, axis=axis)
            np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=f"{op} {axis}")
            if op != "sum":
                np.testing.assert_array_equal(r, ref, err_msg=f"{op} {axis}")


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8", "bool"])
def test_integer_and_bool(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("ints", dtype))
    x = (
        rand(rng, (5, 4099), dtype, low=-100, high=100)
        if dtype != "uint8"
        else rand(rng, (5, 4099), dtype, low=0, high=255)
    )
    if dtype == "int64":
        x[0, :7] = 2**62  # sums wrap in int64 exactly like NumPy
    for op in ("sum", "max", "min", "argmax", "mean"):
        for axis in (None, 0, 1):
            r = getattr(red, op)(up(x, device), axis=axis)
            ref = getattr(cpu, op)(x, axis=axis)
            assert r.dtype.np_dtype == ref.dtype, (op, r.dtype, ref.dtype)
            if op == "mean":
                assert_close(r, as64(x).mean(axis=axis), "float32")
            else:
                np.testing.assert_array_equal(r.to_numpy(), ref, err_msg=f"{op} {axis}")


def test_out_dtype_and_strided_out(device: str) -> None:
    rng = np.random.default_rng(4)
    x = rand(rng, (7, 33), "int32")
    r = red.sum(up(x, device), axis=1, out_dtype=np.int32)
    np.testing.assert_array_equal(r.to_numpy(), cpu.sum(x, axis=1, out_dtype=np.int32))
    f = rand(rng, (33, 7), "float32")
    out = poisoned_strided((33,), "float32", device)
    red.max(up(f, device), axis=1, out=out)
    np.testing.assert_array_equal(out.to_numpy(), cpu.max(f, axis=1))


def test_broadcast_view_and_scalar(device: str) -> None:
    x = rand(np.random.default_rng(5), (1, 33), "float32")
    b = up(x, device).broadcast_to((9, 33))
    assert_close(red.sum(b, axis=0), as64(x)[0] * 9, "float32")
    assert int(red.argmax(b).to_numpy()) == int(np.argmax(np.broadcast_to(x, (9, 33))))
    s = up(np.array(2.5, np.float32), device)
    assert red.sum(s).shape == () and float(red.sum(s).to_numpy()) == 2.5
