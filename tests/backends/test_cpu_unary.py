"""NumPy backend: unary math and activations (erf-GELU accuracy included)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pygpukit.backends import cpu
from pygpukit.backends.cpu.activation import erfc_compute

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return np.array([1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0 for v in x.ravel()]).reshape(
        x.shape
    )


# name -> (float64 formula, input is positive)
UNARY = {
    "neg": (lambda x: -x, False),
    "abs": (np.fabs, False),
    "exp": (np.exp, False),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), True),
    "sin": (np.sin, False),
    "cos": (np.cos, False),
    "tanh": (lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1), False),
    "sigmoid": (_sigmoid64, False),
    "relu": (lambda x: x * (x > 0), False),
    "silu": (lambda x: x * _sigmoid64(x), False),
    "gelu": (lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))), False),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (7,), (33, 7), (4097,)], ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op: str, shape: tuple, dtype: str) -> None:
    ref_fn, positive = UNARY[op]
    x = rand(
        np.random.default_rng(seed(op, shape, dtype)), shape, dtype, scale=2.0, positive=positive
    )
    out = getattr(cpu, op)(x)
    assert out.dtype == np_dtype(dtype) and out.shape == x.shape
    assert_close(out, ref_fn(as64(x)), dtype, name=op)


def test_gelu_tanh_form() -> None:
    for dtype in FLOATS:
        x = rand(np.random.default_rng(seed("gelu_tanh", dtype)), (33, 129), dtype, scale=3.0)
        x64 = as64(x)
        ref = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
        assert_close(cpu.gelu(x, approximate="tanh"), ref, dtype)
    with pytest.raises(ValueError, match="approximate"):
        cpu.gelu(x, approximate="fast")


def test_erfc_float32_fractional_error_bound() -> None:
    # NR erfcc: fractional error < 1.2e-7 in exact arithmetic; float32 evaluation adds a few
    # ulps plus ~z^2 * 2^-23 from rounding z*z (documented in activation.py).
    z = np.linspace(-4.0, 9.0, 20001).astype(np.float32)
    approx = erfc_compute(z).astype(np.float64)
    exact = np.array([math.erfc(float(v)) for v in z])
    frac = np.abs(approx - exact) / exact
    bound = 1.2e-7 + 6e-7 + 2.0**-23 * np.asarray(z, np.float64) ** 2
    assert (frac <= bound).all(), f"worst at z={z[np.argmax(frac / bound)]}"


def test_gelu_negative_tail_is_relatively_accurate() -> None:
    # gelu(x) for x << 0 is tiny; the erfc form keeps relative accuracy where 1 + erf cancels.
    x = -np.linspace(3.0, 9.0, 61)
    ref = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x])
    assert_close(cpu.gelu(x), ref, "float64")
    out32 = cpu.gelu(x.astype(np.float32)).astype(np.float64)
    rel = np.abs(out32 - ref) / np.abs(ref)
    assert rel.max() < 2e-5, rel.max()


def test_int_inputs() -> None:
    x = np.array([-3, 0, 4], np.int32)
    assert cpu.neg(x).dtype == np.int32 and cpu.neg(x).tolist() == [3, 0, -4]
    assert cpu.abs(x).tolist() == [3, 0, 4]
    assert cpu.relu(x).dtype == np.int32 and cpu.relu(x).tolist() == [0, 0, 4]
    e = cpu.exp(x)
    assert e.dtype == np.float32
    assert_close(e, np.exp([-3.0, 0.0, 4.0]), "float32")


def test_ieee_specials_without_warnings() -> None:
    with np.errstate(all="raise"):  # the backend must not trip host FP traps
        assert cpu.log(np.float32([0.0]))[0] == -np.inf
        assert np.isnan(cpu.sqrt(np.float32([-1.0]))[0])
        assert cpu.rsqrt(np.float32([0.0]))[0] == np.inf
        big = np.float32([200.0, -200.0, 1e30, -1e30])
        assert cpu.sigmoid(big).tolist() == [1.0, 0.0, 1.0, 0.0]
        assert cpu.silu(big)[:2].tolist() == [200.0, 0.0]
        assert cpu.gelu(big, approximate="tanh")[2] == np.float32(1e30)
    assert np.isnan(cpu.relu(np.float32([np.nan]))[0])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gated(dtype: str, approximate: str) -> None:
    rng = np.random.default_rng(seed("gated", dtype, approximate))
    gate, up = rand(rng, (7, 4097), dtype, scale=2.0), rand(rng, (7, 4097), dtype)
    g, u = as64(gate), as64(up)
    silu_ref = g / (1.0 + np.exp(-g)) * u
    assert_close(cpu.silu_mul(gate, up), silu_ref, dtype)
    if approximate == "none":
        gelu_ref = 0.5 * g * (1 + _erf(g / math.sqrt(2))) * u
    else:
        gelu_ref = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3))) * u
    out = cpu.gelu_mul(gate, up, approximate=approximate)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, gelu_ref, dtype)


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, st.integers(1, 64), elements=st.floats(-80, 80, width=32)))
def test_sigmoid_symmetry_and_range(x: np.ndarray) -> None:
    # sigmoid(-x) = 1 - sigmoid(x), values in [0, 1], monotone.
    s, sn = cpu.sigmoid(x), cpu.sigmoid(-x)
    assert ((s >= 0) & (s <= 1)).all()
    np.testing.assert_allclose(s.astype(np.float64) + sn, 1.0, atol=1.2e-7)
    order = np.argsort(x, kind="stable")
    assert (np.diff(s[order]) >= 0).all()
