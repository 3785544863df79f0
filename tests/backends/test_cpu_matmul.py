"""NumPy backend: matmul (2-D, N-D broadcast, 1-D), linear with epilogues, linear_bias_gelu."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed

from pygpukit.backends import cpu

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Independent float64 product: broadcast the leading dims, einsum over k."""
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, lead + a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[-2:])
    return np.einsum("...ik,...kj->...ij", a, b)


MM_SHAPES = [
    ((1, 1), (1, 1)),
    ((7, 33), (33, 5)),
    ((33, 4097), (4097, 3)),
    ((2, 3, 7, 11), (11, 13)),
    ((4, 1, 5, 9), (3, 9, 2)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", MM_SHAPES, ids=str)
def test_matmul(shapes: tuple, dtype: str) -> None:
    rng = np.random.default_rng(seed("mm", shapes, dtype))
    a, b = rand(rng, shapes[0], dtype), rand(rng, shapes[1], dtype)
    out = cpu.matmul(a, b)
    ref = _matmul_ref(as64(a), as64(b))
    assert out.dtype == np_dtype(dtype) and out.shape == ref.shape
    assert_close(out, ref, dtype)


def test_matmul_1d_and_int() -> None:
    rng = np.random.default_rng(2)
    a, b = rand(rng, (7,), "float32"), rand(rng, (7, 5), "float32")
    assert_close(cpu.matmul(a, b), as64(a) @ as64(b), "float32")
    assert cpu.matmul(a, a).shape == ()
    ai, bi = rand(rng, (3, 4), "int32"), rand(rng, (4, 2), "int32")
    out = cpu.matmul(ai, bi)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ai.astype(np.int64) @ bi.astype(np.int64))


def test_matmul_out_dtype() -> None:
    rng = np.random.default_rng(3)
    a, b = rand(rng, (7, 33), "float8_e4m3fn"), rand(rng, (33, 5), "float8_e4m3fn")
    out = cpu.matmul(a, b, out_dtype=np.float32)
    assert out.dtype == np.float32
    assert_close(out, as64(a) @ as64(b), "float32")


def _act(y: np.ndarray, activation: str | None) -> np.ndarray:
    if activation is None:
        return y
    if activation == "relu":
        return np.where(y > 0, y, 0.0)
    if activation == "silu":
        return y / (1 + np.exp(-y))
    if activation == "gelu":
        return 0.5 * y * (1 + _erf(y / math.sqrt(2)))
    return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("activation", [None, "relu", "silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear(dtype: str, activation: str | None, with_bias: bool) -> None:
    rng = np.random.default_rng(seed("linear", dtype, activation, with_bias))
    x, w = rand(rng, (2, 7, 33), dtype), rand(rng, (17, 33), dtype, scale=0.3)
    bias = rand(rng, 17, dtype) if with_bias else None
    y = np.einsum("...k,nk->...n", as64(x), as64(w))
    if bias is not None:
        y = y + as64(bias)
    out = cpu.linear(x, w, bias, activation=activation)
    assert out.dtype == np_dtype(dtype) and out.shape == (2, 7, 17)
    assert_close(out, _act(y, activation), dtype)


def test_linear_bad_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        cpu.linear(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32), activation="tanh")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_bias_gelu(approximate: str) -> None:
    rng = np.random.default_rng(seed("lbg", approximate))
    x, w, b = (
        rand(rng, (7, 129), "float32"),
        rand(rng, (33, 129), "float32"),
        rand(rng, 33, "float32"),
    )
    ref = _act(as64(x) @ as64(w).T + as64(b), "gelu" if approximate == "none" else "gelu_tanh")
    assert_close(cpu.linear_bias_gelu(x, w, b, approximate=approximate), ref, "float32")
    with pytest.raises(ValueError, match="approximate"):
        cpu.linear_bias_gelu(x, w, b, approximate="erf")
