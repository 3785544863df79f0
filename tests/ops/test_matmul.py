"""Public matmul, transpose, linear and linear_bias_gelu on the test device (ops._helpers.DEVICE,
CPU by default)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _mm_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Independent of np.matmul: broadcast the batch dims explicitly, contract with einsum."""
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, lead + a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[-2:])
    return np.einsum("...ik,...kj->...ij", a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shapes", [((7, 33), (33, 5)), ((2, 3, 7, 129), (129, 17)),
                                    ((4, 1, 5, 9), (3, 9, 2))], ids=str)  # fmt: skip
def test_matmul(shapes: tuple, dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed("mm", shapes, dtype, layout))
    a, b = rand(rng, shapes[0], dtype), rand(rng, shapes[1], dtype)
    ref = _mm_ref(as64(a), as64(b))
    out = poisoned(ref.shape, dtype)
    r = gp.matmul(view(a, layout), view(b, layout), out=out)
    assert r is out
    assert_close(r, ref, dtype)


def test_matmul_operator_vectors_and_transpose() -> None:
    rng = np.random.default_rng(1)
    a, b = rand(rng, (33, 7), "float32"), rand(rng, (33, 5), "float32")
    at = gp.transpose(up(a))
    assert at.shape == (7, 33) and not at.is_contiguous()
    assert_close(at @ up(b), as64(a).T @ as64(b), "float32")
    v = rand(rng, 33, "float32")
    assert_close(gp.matmul(up(v), up(b)), as64(v) @ as64(b), "float32")
    assert gp.matmul(up(v), up(v)).shape == ()
    t = gp.transpose(up(rand(rng, (2, 3, 4), "float32")), 1, 0, 2)
    assert t.shape == (3, 2, 4)
    i = rand(rng, (3, 4), "int32")
    np.testing.assert_array_equal(gp.matmul(up(i), up(i.T.copy())).to_numpy(), i @ i.T)


def _act(y: np.ndarray, act: str | None) -> np.ndarray:
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "silu":
        return y / (1 + np.exp(-y))
    if act == "gelu":
        return 0.5 * y * (1 + _erf(y / math.sqrt(2)))
    if act == "gelu_tanh":
        return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))
    return y


@pytest.mark.parametrize("activation", [None, "relu", "silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear(activation: str | None, dtype: str) -> None:
    rng = np.random.default_rng(seed("linear", activation, dtype))
    x, w, b = (
        rand(rng, (2, 7, 65), dtype),
        rand(rng, (33, 65), dtype, scale=0.3),
        rand(rng, 33, dtype),
    )
    out = poisoned((2, 7, 33), dtype)
    r = gp.linear(view(x, "strided"), view(w, "transposed"), up(b), activation, out=out)
    assert r is out
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), activation), dtype)
    assert_close(gp.linear(up(x), up(w)), as64(x) @ as64(w).T, dtype)


def test_linear_bias_gelu_legacy_form() -> None:
    rng = np.random.default_rng(3)
    x, w, b = (
        rand(rng, (7, 129), "float16"),
        rand(rng, (33, 129), "float16", scale=0.2),
        rand(rng, 33, "float16"),
    )
    r = gp.linear_bias_gelu(up(x), up(w), up(b))
    assert r.dtype is gp.float16 and r.shape == (7, 33)
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu"), "float16")
    r = gp.linear_bias_gelu(up(x), up(w), up(b), approximate="tanh")
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu_tanh"), "float16")


def test_errors() -> None:
    a = up(np.ones((3, 4), np.float32))
    with pytest.raises(
        ValueError,
        match=r"matmul: a has shape \(3, 4\) .* a's last dim 4 must equal b's second-to-last dim 5",
    ):
        gp.matmul(a, up(np.ones((5, 2), np.float32)))
    with pytest.raises(ValueError, match=r"matmul: batch dims of a \(2,\) and b \(3,\)"):
        gp.matmul(up(np.ones((2, 3, 4), np.float32)), up(np.ones((3, 4, 2), np.float32)))
    with pytest.raises(TypeError, match="matmul: b must be a GPUArray"):
        gp.matmul(a, np.ones((4, 2)))
    with pytest.raises(
        ValueError, match=r"linear: weight has shape \(4, 3\) but must be \[out_features, 4\]"
    ):
        gp.linear(a, up(np.ones((4, 3), np.float32)))
    with pytest.raises(
        ValueError, match=r"linear_bias_gelu: bias has shape \(5,\) but weight has 2 out_features"
    ):
        gp.linear_bias_gelu(a, up(np.ones((2, 4), np.float32)), up(np.ones(5, np.float32)))
    with pytest.raises(ValueError, match="linear: activation must be one of"):
        gp.linear(a, up(np.ones((2, 4), np.float32)), activation="tanh")
    with pytest.raises(ValueError, match=r"matmul: out has shape \(3, 3\)"):
        gp.matmul(a, up(np.ones((4, 2), np.float32)), out=gp.empty((3, 3), device=DEVICE))
