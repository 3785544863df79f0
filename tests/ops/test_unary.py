"""Public unary math ops on the test device (ops._helpers.DEVICE, CPU by default; results, layouts,
out=, errors)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

UNARY = {
    "neg": (lambda x: -x, False),
    "abs": (np.fabs, False),
    "exp": (np.exp, False),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), True),
    "sin": (np.sin, False),
    "cos": (np.cos, False),
    "tanh": (lambda x: np.sinh(x) / np.cosh(x), False),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op: str, dtype: str, layout: str) -> None:
    ref, positive = UNARY[op]
    a = rand(np.random.default_rng(seed(op, dtype, layout)), (7, 33), dtype, positive=positive)
    r = getattr(gp, op)(view(a, layout))
    assert r.dtype is gp.as_dtype(dtype) and r.shape == (7, 33)
    assert_close(r, ref(as64(a)), dtype, name=op)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_out_poisoned(op: str) -> None:
    ref, positive = UNARY[op]
    a = rand(np.random.default_rng(seed("out", op)), 4097, "float32", positive=positive)
    out = poisoned((4097,), "float32")
    assert getattr(gp, op)(up(a), out=out) is out
    assert_close(out, ref(as64(a)), "float32")


def test_integer_inputs() -> None:
    i = np.array([-3, 1, 4], np.int32)
    assert gp.neg(up(i)).dtype is gp.int32 and gp.neg(up(i)).to_numpy().tolist() == [3, -1, -4]
    assert gp.abs(up(i)).to_numpy().tolist() == [3, 1, 4]
    r = gp.exp(up(i))
    assert r.dtype is gp.float32
    assert_close(r, np.exp(i.astype(np.float64)), "float32")
    assert_close(gp.sqrt(up(np.array([4, 9], np.int64))), np.array([2.0, 3.0]), "float32")
    assert_close(-up(np.array([1.5], np.float32)), np.array([-1.5]), "float32")
    assert_close(abs(up(np.array([-1.5], np.float32))), np.array([1.5]), "float32")


def test_special_values() -> None:
    r = gp.log(up(np.array([0.0, -1.0, math.inf], np.float32))).to_numpy()
    assert r[0] == -np.inf and np.isnan(r[1]) and r[2] == np.inf
    assert gp.rsqrt(up(np.array([0.0], np.float32))).to_numpy()[0] == np.inf


def test_errors() -> None:
    with pytest.raises(TypeError, match="exp: x must be a GPUArray, got ndarray"):
        gp.exp(np.ones(3))
    with pytest.raises(TypeError, match=r"neg: x must be a numeric array .* dtype bool"):
        gp.neg(up(np.array([True])))
    f8 = up(np.ones(3, ml_dtypes.float8_e5m2))
    with pytest.raises(TypeError, match=r"sqrt: x .*float8_e5m2; cast it first"):
        gp.sqrt(f8)
    with pytest.raises(TypeError, match="result dtype is float32"):
        gp.exp(up(np.ones(3, np.int32)), out=gp.empty((3,), dtype="int32", device=DEVICE))
