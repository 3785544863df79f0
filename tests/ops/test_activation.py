"""Public activations on the test device (ops._helpers.DEVICE, CPU by default): sigmoid, relu, silu,
gelu, softplus, silu_mul, gelu_mul."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


ACT = {
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": _gelu,
    "softplus": lambda x: np.logaddexp(x, 0.0),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(ACT))
def test_activation(op: str, dtype: str, layout: str) -> None:
    a = rand(np.random.default_rng(seed(op, dtype, layout)), (33, 7), dtype, scale=3.0)
    out = poisoned((33, 7), dtype)
    r = getattr(gp, op)(view(a, layout), out=out)
    assert r is out
    assert_close(r, ACT[op](as64(a)), dtype, name=op)


def test_gelu_tanh_and_int_relu() -> None:
    a = rand(np.random.default_rng(1), 4097, "float32", scale=3.0)
    assert_close(gp.gelu(up(a), approximate="tanh"), _gelu_tanh(as64(a)), "float32")
    assert_close(gp.gelu(up(a), "tanh"), _gelu_tanh(as64(a)), "float32")
    r = gp.relu(up(np.array([-2, 0, 3], np.int32)))
    assert r.dtype is gp.int32 and r.to_numpy().tolist() == [0, 0, 3]
    assert gp.sigmoid(up(np.array([0], np.int32))).dtype is gp.float32


def test_softplus_extremes_and_integers() -> None:
    # Large |x| (exp would overflow, 1 + exp(x) would lose the small term), zero, NaN, inf:
    # every value to float32's precision against float64's logaddexp (softplus(-100) is a
    # float32 subnormal: there the bound is the subnormal spacing).
    x = np.array([-1e4, -100.0, -30.0, -1e-6, 0.0, 1e-6, 30.0, 100.0, 1e4], np.float32)
    r = gp.softplus(up(x)).to_numpy()
    np.testing.assert_allclose(r, np.logaddexp(x.astype(np.float64), 0.0), rtol=2e-7, atol=1.5e-45)
    special = gp.softplus(up(np.array([np.nan, -np.inf, np.inf], np.float32))).to_numpy()
    assert np.isnan(special[0]) and special[1] == 0.0 and special[2] == np.inf
    r = gp.softplus(up(np.array([-3, 0, 3], np.int32)))
    assert r.dtype is gp.float32
    assert_close(r, np.logaddexp(np.array([-3.0, 0.0, 3.0]), 0.0), "float32")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gated(dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed("gated", dtype, layout))
    g, u = rand(rng, (7, 129), dtype, scale=2.0), rand(rng, (7, 129), dtype)
    out = poisoned((7, 129), dtype)
    r = gp.silu_mul(view(g, layout), view(u, layout), out=out)
    assert r is out
    assert_close(r, ACT["silu"](as64(g)) * as64(u), dtype)
    assert_close(gp.gelu_mul(view(g, layout), up(u)), _gelu(as64(g)) * as64(u), dtype)
    assert_close(gp.gelu_mul(up(g), up(u), "tanh"), _gelu_tanh(as64(g)) * as64(u), dtype)


def test_errors() -> None:
    x = up(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"gelu: approximate must be one of \('none', 'tanh'\)"):
        gp.gelu(x, approximate="fast")
    with pytest.raises(
        ValueError, match=r"silu_mul: gate has shape \(2, 3\).* but up has shape \(3,\)"
    ):
        gp.silu_mul(x, up(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match=r"gelu_mul: up must be a float16/bfloat16.*int32"):
        gp.gelu_mul(x, up(np.ones((2, 3), np.int32)))
    with pytest.raises(TypeError, match="silu: x must be a GPUArray, got list"):
        gp.silu([1.0, 2.0])
    with pytest.raises(TypeError, match=r"relu: out has .*float16 but the result dtype is float32"):
        gp.relu(x, out=gp.empty((2, 3), dtype="float16", device=DEVICE))
