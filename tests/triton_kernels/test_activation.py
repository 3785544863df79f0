"""Triton activation launchers (sigmoid, relu, silu, gelu, softplus, silu_mul, gelu_mul) against
NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, np_dtype, rand, seed
from _tkutil import FLOATS64, LAYOUTS, poisoned, up, view

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import activation as act

_erf = np.vectorize(math.erf)


def _ref(op: str, x: np.ndarray) -> np.ndarray:
    """Float64 formulas written from the definitions (not the backend's evaluation order)."""
    sig = 1.0 / (1.0 + np.exp(-x))
    if op == "sigmoid":
        return sig
    if op == "silu":
        return x * sig
    if op == "relu":
        return np.maximum(x, 0.0)
    if op == "softplus":
        return np.logaddexp(x, 0.0)
    if op == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1.0 + np.tanh(u))  # gelu_tanh


@pytest.mark.parametrize("shape", [(1,), (4097,), (7, 33)], ids=str)
@pytest.mark.parametrize("op", ["sigmoid", "relu", "silu", "gelu", "gelu_tanh", "softplus"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_activation(device: str, dtype: str, op: str, shape: tuple) -> None:
    rng = np.random.default_rng(seed("act", op, dtype, shape))
    x = rand(rng, shape, dtype, scale=3.0)
    if op.startswith("gelu"):
        r = act.gelu(up(x, device), approximate="tanh" if op == "gelu_tanh" else "none")
    else:
        r = getattr(act, op)(up(x, device))
    assert r.dtype is gp.as_dtype(dtype)
    rtol = 1e-11 if dtype == "float64" else None  # libdevice erfc in float64
    assert_close(r, _ref(op, as64(x)), dtype, rtol=rtol, name=op)


def test_no_overflow_and_nan(device: str) -> None:
    x = np.array([-100.0, -88.0, 0.0, 88.0, 100.0, np.nan, -np.inf, np.inf], np.float32)
    for op in ("sigmoid", "silu", "gelu", "relu", "softplus"):
        r = getattr(act, op)(up(x, device)).to_numpy()
        ref = getattr(cpu, op)(x)
        np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=op)
        np.testing.assert_allclose(r, ref, rtol=1e-6, atol=1e-37, err_msg=op)  # denormals


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_relu_integers(device: str, dtype: str) -> None:
    x = rand(np.random.default_rng(1), (7, 33), dtype)
    r = act.relu(up(x, device))
    assert r.dtype is gp.as_dtype(dtype)
    np.testing.assert_array_equal(r.to_numpy(), cpu.relu(x))
    r = act.sigmoid(up(x, device))  # integers give float32
    assert_close(r, _ref("sigmoid", as64(x)), "float32")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["silu_mul", "gelu_mul", "gelu_mul_tanh"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_gated(device: str, dtype: str, op: str, layout: str) -> None:
    rng = np.random.default_rng(seed("gated", op, dtype, layout))
    gate, upv = rand(rng, (7, 129), dtype, scale=2.0), rand(rng, (7, 129), dtype)
    base = "silu" if op == "silu_mul" else ("gelu_tanh" if op.endswith("tanh") else "gelu")
    kw = {} if op == "silu_mul" else {"approximate": "tanh" if op.endswith("tanh") else "none"}
    fn = act.silu_mul if op == "silu_mul" else act.gelu_mul
    out = poisoned((7, 129), dtype, device)
    r = fn(view(gate, layout, device), view(upv, "strided", device), out=out, **kw)
    assert r is out
    rtol = 1e-11 if dtype == "float64" else None
    assert_close(out, _ref(base, as64(gate)) * as64(upv), dtype, rtol=rtol)


@pytest.mark.parametrize("dtype", FLOATS64)
def test_gated_fused_halves(device: str, dtype: str) -> None:
    # gate and up as the two halves of one [M, 2I] projection output (row-strided views).
    rng = np.random.default_rng(seed("halves", dtype))
    gu = rand(rng, (33, 2 * 257), dtype, scale=2.0)
    d = up(gu, device)
    r = act.silu_mul(d[:, :257], d[:, 257:])
    assert r.shape == (33, 257) and r.is_contiguous()
    g64, u64 = as64(gu[:, :257]), as64(gu[:, 257:])
    assert_close(r, _ref("silu", g64) * u64, dtype, rtol=1e-11 if dtype == "float64" else None)


def test_gated_mixed_dtypes(device: str) -> None:
    rng = np.random.default_rng(9)
    g, u = rand(rng, (5, 33), "float32"), rand(rng, (5, 33), "float32")
    r = act.silu_mul(up(g, device), up(u, device), out_dtype=np_dtype("float32"))
    assert_close(r, _ref("silu", as64(g)) * as64(u), "float32")
