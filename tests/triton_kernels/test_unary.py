"""Triton unary launchers (neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, np_dtype, rand, seed
from _tkutil import FLOATS64, LAYOUTS, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import unary

OPS = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh"]
POSITIVE = {"log", "sqrt", "rsqrt"}


@pytest.mark.parametrize("shape", [(1,), (4097,), (7, 33)], ids=str)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_unary(device: str, dtype: str, op: str, shape: tuple) -> None:
    rng = np.random.default_rng(seed("unary", op, dtype, shape))
    x = rand(rng, shape, dtype, scale=2.0, positive=op in POSITIVE)
    r = getattr(unary, op)(up(x, device))
    assert r.dtype is gp.as_dtype(dtype)
    assert_close(r, getattr(cpu, op)(as64(x)), dtype, name=op)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["neg", "exp", "sin", "rsqrt"])
def test_unary_layouts_out(device: str, op: str, layout: str) -> None:
    rng = np.random.default_rng(seed("unary-lay", op, layout))
    x = rand(rng, (5, 33), "float32", positive=True)
    out = poisoned((5, 33), "float32", device)
    assert getattr(unary, op)(view(x, layout, device), out=out) is out
    assert_close(out, getattr(cpu, op)(as64(x)), "float32")
    out2 = poisoned_strided((5, 33), "float32", device)
    getattr(unary, op)(view(x, layout, device), out=out2)
    assert_close(out2, getattr(cpu, op)(as64(x)), "float32")


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_integer_inputs(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("unary-int", dtype))
    x = rand(rng, (7, 33), dtype)
    for op in ("neg", "abs"):  # keep the integer dtype, wrap like NumPy
        r = getattr(unary, op)(up(x, device))
        np.testing.assert_array_equal(r.to_numpy(), getattr(cpu, op)(x))
    r = unary.exp(up(x // 10, device))  # integers give float32
    assert r.dtype is gp.float32
    assert_close(r, np.exp(as64(x // 10)), "float32")
    edge = np.array([np.iinfo(np_dtype(dtype)).min, -1, 0, 5], np_dtype(dtype))
    np.testing.assert_array_equal(unary.abs(up(edge, device)).to_numpy(), cpu.abs(edge))


def test_special_values(device: str) -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-30], np.float32)
    for op in OPS:
        r = getattr(unary, op)(up(x, device)).to_numpy()
        ref = getattr(cpu, op)(x)
        np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=op)
        fin = np.isfinite(ref)
        np.testing.assert_array_equal(r[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)], op)
        np.testing.assert_allclose(r[fin], ref[fin], rtol=1e-6, atol=1e-37, err_msg=op)
    np.testing.assert_array_equal(np.signbit(unary.abs(up(x, device)).to_numpy()), False)
