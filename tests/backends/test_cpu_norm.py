"""NumPy backend: layernorm and rmsnorm (with the fused residual add)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed

from pygpukit.backends import cpu

SHAPES = [(1, 1), (1, 7), (33, 4097), (2, 3, 129)]


def _layernorm_ref(
    x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float
) -> np.ndarray:
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        mu = math.fsum(row) / row.size
        var = math.fsum((row - mu) ** 2) / row.size
        out[idx] = (row - mu) / math.sqrt(var + eps)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


def _rmsnorm_ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.array([math.fsum(r * r) / r.size for r in x.reshape(-1, x.shape[-1])])
    return x / np.sqrt(ms.reshape((*x.shape[:-1], 1)) + eps) * w


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layernorm(shape: tuple, dtype: str, affine: str) -> None:
    rng = np.random.default_rng(seed("ln", shape, dtype, affine))
    x = rand(rng, shape, dtype, scale=3.0)
    x = (as64(x) + 2.0).astype(x.dtype)  # a nonzero mean exercises the centring
    w = rand(rng, shape[-1], dtype) if affine != "none" else None
    b = rand(rng, shape[-1], dtype) if affine == "both" else None
    out = cpu.layernorm(x, w, b, eps=1e-5)
    ref = _layernorm_ref(
        as64(x), None if w is None else as64(w), None if b is None else as64(b), 1e-5
    )
    assert out.dtype == np_dtype(dtype)
    if shape[-1] == 1:  # (x - mu) == 0 exactly: the output is the bias (or 0)
        np.testing.assert_array_equal(as64(out), ref)
    else:
        assert_close(out, ref, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rmsnorm(shape: tuple, dtype: str) -> None:
    rng = np.random.default_rng(seed("rms", shape, dtype))
    x, w = rand(rng, shape, dtype, scale=3.0), rand(rng, shape[-1], dtype)
    out = cpu.rmsnorm(x, w, eps=1e-6)
    assert isinstance(out, np.ndarray) and out.dtype == np_dtype(dtype)
    assert_close(out, _rmsnorm_ref(as64(x), as64(w), 1e-6), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rmsnorm_fused_residual(dtype: str) -> None:
    rng = np.random.default_rng(seed("rms_res", dtype))
    x, r, w = rand(rng, (7, 4097), dtype), rand(rng, (7, 4097), dtype), rand(rng, 4097, dtype)
    y, h = cpu.rmsnorm(x, w, r, eps=1e-6)
    assert y.dtype == h.dtype == np_dtype(dtype)
    # h is the sum rounded once to x's dtype, and y normalises that stored h.
    h_ref = (as64(x) + as64(r)).astype(np.float32 if dtype != "float64" else np.float64)
    np.testing.assert_array_equal(as64(h), as64(h_ref.astype(np_dtype(dtype))))
    assert_close(y, _rmsnorm_ref(as64(h), as64(w), 1e-6), dtype)


def test_norm_eps_matters() -> None:
    x = np.full((1, 4), 1e-3, np.float64)
    w = np.ones(4)
    assert_close(cpu.rmsnorm(x, w, eps=1e-6), x / math.sqrt(1e-6 + 1e-6), "float64")
    assert_close(
        cpu.layernorm(np.array([[0.0, 2e-3]]), eps=1e-2),
        np.array([[-1, 1]]) * 1e-3 / math.sqrt(1e-6 + 1e-2),
        "float64",
    )
