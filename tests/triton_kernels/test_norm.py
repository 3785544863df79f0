"""Triton rmsnorm (optionally fused with the residual add) and layernorm against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS64, LAYOUTS, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends.triton_kernels.norm import layernorm, rmsnorm


def _rms_ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    rows = x.reshape(-1, x.shape[-1])
    ms = np.array([math.fsum(r * r) / r.size for r in rows]).reshape((*x.shape[:-1], 1))
    return x / np.sqrt(ms + eps) * w


def _ln_ref(x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float) -> np.ndarray:
    rows = x.reshape(-1, x.shape[-1])
    mu = np.array([math.fsum(r) / r.size for r in rows])[:, None]
    var = np.array([math.fsum((r - m) ** 2) / r.size for r, m in zip(rows, mu, strict=True)])
    y = ((rows - mu) / np.sqrt(var[:, None] + eps)).reshape(x.shape)
    return y * (1.0 if w is None else w) + (0.0 if b is None else b)


# Rows of 1, 7, 33, 4097 (single pass, short rows packed) and 16411 (> SINGLE_MAX: chunked).
SHAPES = [(1, 1), (3, 7), (2, 5, 33), (3, 4097), (2, 16411)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_rmsnorm(device: str, dtype: str, shape: tuple) -> None:
    rng = np.random.default_rng(seed("rms", dtype, shape))
    x, w = rand(rng, shape, dtype, scale=2.0), rand(rng, shape[-1], dtype)
    y = rmsnorm(up(x, device), up(w, device), eps=1e-6)
    assert y.dtype is gp.as_dtype(dtype) and y.shape == x.shape
    assert_close(y, _rms_ref(as64(x), as64(w), 1e-6), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_rmsnorm_residual(device: str, dtype: str, shape: tuple) -> None:
    rng = np.random.default_rng(seed("rms-res", dtype, shape))
    x, res = rand(rng, shape, dtype), rand(rng, shape, dtype)
    w = rand(rng, shape[-1], "float32")  # float32 weights with half activations
    y, h = rmsnorm(up(x, device), up(w, device), up(res, device), eps=1e-5)
    assert y.dtype is h.dtype is gp.as_dtype(dtype)
    # h is x + residual rounded once to x's dtype; y normalises that rounded h.
    h_ref = (as64(x) + as64(res)).astype(np.float32 if dtype != "float64" else np.float64)
    h_ref = h_ref.astype(h.dtype.np_dtype)
    np.testing.assert_array_equal(h.to_numpy(), h_ref)
    assert_close(y, _rms_ref(as64(h_ref), as64(w), 1e-5), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rmsnorm_layouts_and_out(device: str, layout: str) -> None:
    rng = np.random.default_rng(seed("rms-lay", layout))
    x, res, w = (
        rand(rng, (2, 7, 257), "float32"),
        rand(rng, (2, 7, 257), "float32"),
        rand(rng, 257, "float32"),
    )
    wv = view(w[None], "strided", device)[0]  # a strided weight vector
    out = poisoned(x.shape, "float32", device)
    assert rmsnorm(view(x, layout, device), wv, out=out) is out
    assert_close(out, _rms_ref(as64(x), as64(w), 1e-6), "float32")
    out2 = poisoned_strided(x.shape, "float32", device)
    y, h = rmsnorm(view(x, layout, device), wv, view(res, "transposed", device), out=out2)
    assert y is out2
    assert_close(h, as64(x) + as64(res), "float32")
    assert_close(y, _rms_ref(as64(h.to_numpy()), as64(w), 1e-6), "float32")


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_layernorm(device: str, dtype: str, shape: tuple, affine: str) -> None:
    rng = np.random.default_rng(seed("ln", dtype, shape, affine))
    x = rand(rng, shape, dtype, scale=2.0) + np.asarray(3.0, dtype=rand(rng, 1, dtype).dtype)
    w = rand(rng, shape[-1], dtype) if affine in ("both", "weight") else None
    b = rand(rng, shape[-1], dtype) if affine in ("both", "bias") else None
    y = layernorm(
        up(x, device),
        None if w is None else up(w, device),
        None if b is None else up(b, device),
        eps=1e-5,
    )
    assert y.dtype is gp.as_dtype(dtype)
    ref = _ln_ref(as64(x), None if w is None else as64(w), None if b is None else as64(b), 1e-5)
    assert_close(y, ref, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layernorm_layouts_and_out(device: str, layout: str) -> None:
    rng = np.random.default_rng(seed("ln-lay", layout))
    x, w, b = rand(rng, (3, 5, 65), "float32"), rand(rng, 65, "float32"), rand(rng, 65, "float32")
    out = poisoned(x.shape, "float32", device)
    assert layernorm(view(x, layout, device), up(w, device), up(b, device), out=out) is out
    assert_close(out, _ln_ref(as64(x), as64(w), as64(b), 1e-5), "float32")
    out2 = poisoned_strided(x.shape, "float32", device)
    layernorm(view(x, layout, device), out=out2)
    assert_close(out2, _ln_ref(as64(x), None, None, 1e-5), "float32")


def test_leading_dims_that_do_not_collapse(device: str) -> None:
    # Four leading dims, each strided differently (more than the three the kernel decomposes).
    rng = np.random.default_rng(8)
    x = rand(rng, (2, 3, 2, 3, 4), "float32")
    d = up(np.ascontiguousarray(x.transpose(3, 1, 2, 0, 4)), device).permute(3, 1, 2, 0, 4)
    w = rand(rng, 4, "float32")
    assert_close(rmsnorm(d, up(w, device)), _rms_ref(as64(x), as64(w), 1e-6), "float32")
    assert_close(layernorm(d), _ln_ref(as64(x), None, None, 1e-5), "float32")
