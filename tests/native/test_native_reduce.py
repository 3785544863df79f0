"""Native twins of sum, mean, max, min, argmax on the GPU, through the public ops with every
route forced to native: sums against exact (fsum) references with an error bound scaled by the
magnitude of the terms, extremes and argmax exact (NaN, ties: first index), integer sums exact
with int64 wrap-around, the split-K (two-launch) path on long reductions, deterministic."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import reduce as red

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
FLOATS = ["float32", "float16", "bfloat16", "float64"]
# (shape, axis): full, each axis, adjacent and non-adjacent tuples, primes; (20011,), (3, 9001),
# (9001, 3) and (1 << 22,) take the split-K path; (4099, 257) many rows of a prime length.
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
    ((4099, 257), 1),
    ((4099, 257), 0),
    ((3, 5, 7), (0, 2)),
    ((3, 5, 7), (1, 2)),
    ((3, 5, 7), 1),
    ((1 << 22,), None),
]


@pytest.fixture(autouse=True)
def _native() -> Iterator[None]:
    with gp.route("*:native"):
        yield


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.array(x, order="C"), device=DEV)


def view(x: np.ndarray, layout: str) -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "strided" and x.ndim:
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return up(wide)[..., ::2]
    return up(x)


def poisoned(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    dt = gp.as_dtype(dtype)
    if dt.is_floating:
        return gp.full(shape, float("nan"), dtype=dt, device=DEV)
    return gp.full(shape, int(np.iinfo(dt.np_dtype).min), dtype=dt, device=DEV)


def _sum_ref(x: np.ndarray, axis: Any, keepdims: bool) -> tuple[np.ndarray, np.ndarray]:
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


def _check_sum(out: gp.GPUArray, ref: np.ndarray, mag: np.ndarray, dtype: str) -> None:
    """|out - ref| <= bound * (sum |x| + |ref|): the accumulator's rounding error scale plus the
    final rounding to the result dtype."""
    bound = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1e-2, "float64": 1e-14}[dtype]
    o = as64(out.to_numpy())
    assert np.isfinite(o).all(), "non-finite sums"
    err = np.abs(o - ref)
    lim = bound * (mag + np.abs(ref))
    assert (err <= lim).all(), f"max err {err.max():.3e}, worst ratio {(err / lim).max():.2f}"


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_mean(dtype: str, shape: tuple, axis: Any, keepdims: bool) -> None:
    rng = np.random.default_rng(seed("nsum", dtype, shape, axis))
    x = rand(rng, shape, dtype)
    ref, mag = _sum_ref(as64(x), axis, keepdims)
    s = gp.sum(view(x, "transposed"), axis, keepdims)
    assert s.dtype is gp.as_dtype(dtype) and s.shape == np.shape(ref)
    _check_sum(s, ref, mag, dtype)
    cnt = x.size / max(np.size(ref), 1)
    out = poisoned(np.shape(ref), dtype)
    m = gp.mean(view(x, "strided"), axis, keepdims, out=out)
    assert m is out
    _check_sum(m, ref / cnt, mag / cnt, dtype)


def test_routes_to_native_and_deterministic() -> None:
    x = rand(np.random.default_rng(0), (1 << 22,), "float32")
    g = up(x)
    assert gp.routing.explain("sum", g, axis=None).backend == "native"
    first = gp.sum(g).to_numpy()
    for _ in range(3):  # same launch shape, same combination order: the same bits
        assert gp.sum(g).to_numpy().tobytes() == first.tobytes()


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize("op", ["max", "min", "argmax"])
@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
def test_extremes(dtype: str, op: str, shape: tuple, axis: Any, keepdims: bool) -> None:
    if op == "argmax" and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    rng = np.random.default_rng(seed("next", op, dtype, shape, axis))
    x = rand(rng, shape, dtype, low=-5, high=5)  # small ints: many ties (first index wins)
    ref = getattr(cpu, op)(x, axis=axis, keepdims=keepdims)
    out = poisoned(np.shape(ref), "int64" if op == "argmax" else dtype)
    r = getattr(gp, op)(view(x, "strided"), axis, keepdims, out=out)
    assert r is out
    np.testing.assert_array_equal(r.to_numpy(), ref)
    r = getattr(gp, op)(view(x, "transposed"), axis, keepdims)
    np.testing.assert_array_equal(r.to_numpy(), ref)


def test_nan_and_inf() -> None:
    x = rand(np.random.default_rng(1), (4, 20011), "float32")
    x[1, 17] = x[1, 19000] = np.nan
    x[2, :] = -np.inf
    x[3, 5000] = np.inf
    for op in ("max", "min", "argmax", "sum"):
        for axis in (None, 1, 0):
            r = getattr(gp, op)(up(x), axis).to_numpy()
            ref = getattr(cpu, op)(x, axis=axis)
            np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=f"{op} {axis}")
            if op != "sum":
                np.testing.assert_array_equal(r, ref, err_msg=f"{op} {axis}")


@pytest.mark.parametrize("dtype", ["int64", "int16", "int8", "uint8", "bool"])
def test_integer_and_bool(dtype: str) -> None:
    rng = np.random.default_rng(seed("nints", dtype))
    if dtype == "bool":
        x = rng.random((5, 40999)) < 0.5
    else:
        info = np.iinfo(gp.as_dtype(dtype).np_dtype)
        x = rng.integers(info.min, info.max, (5, 40999), endpoint=True).astype(info.dtype)
    if dtype == "int64":
        x[0, :7] = 2**62  # sums wrap in int64 exactly like NumPy
    for op in ("sum", "max", "min", "argmax", "mean"):
        for axis in (None, 0, 1):
            r = getattr(gp, op)(view(x, "strided"), axis)
            ref = getattr(cpu, op)(x, axis=axis)
            assert r.dtype.np_dtype == ref.dtype, (op, r.dtype, ref.dtype)
            if op == "mean":
                assert_close(r, as64(x).mean(axis=axis), "float32")
            else:
                np.testing.assert_array_equal(r.to_numpy(), ref, err_msg=f"{op} {axis}")


def test_out_dtype_strided_out_broadcast_and_scalar() -> None:
    rng = np.random.default_rng(4)
    x = rand(rng, (7, 33), "int32")
    r = red.sum(up(x), axis=1, out_dtype=np.int32)
    np.testing.assert_array_equal(r.to_numpy(), cpu.sum(x, axis=1, out_dtype=np.int32))
    h = rand(rng, (9, 3001), "float16")
    r = red.sum(up(h), axis=1, out_dtype=np.float64)  # float64 accumulation, as the twin
    np.testing.assert_allclose(r.to_numpy(), as64(h).sum(1), rtol=1e-13)
    f = rand(rng, (33, 7), "float32")
    base = gp.full((66,), float("nan"), dtype="float32", device=DEV)
    gp.max(up(f), 1, out=base[::2])
    np.testing.assert_array_equal(base.to_numpy()[::2], cpu.max(f, axis=1))
    assert np.isnan(base.to_numpy()[1::2]).all()
    b = up(f[:1]).broadcast_to((9, 7))
    assert_close(gp.sum(b, 0), as64(f)[0] * 9, "float32")
    assert int(gp.argmax(b).to_numpy()) == int(np.argmax(np.broadcast_to(f[:1], (9, 7))))
    s = up(np.array(2.5, np.float32))
    assert gp.sum(s).shape == () and float(gp.sum(s).to_numpy()) == 2.5
    z = gp.sum(up(np.ones((4, 0, 3), np.float32)), 1)
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((4, 3), np.float32))
