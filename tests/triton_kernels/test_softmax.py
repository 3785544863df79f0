"""Triton softmax (any axis, scale, end-aligned causal mask) against a float64 NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS64, LAYOUTS, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends.triton_kernels.softmax import softmax


def _ref(x: np.ndarray, axis: int = -1, scale: float | None = None, causal: bool = False):
    s = x * (1.0 if scale is None else scale)
    if causal:
        sq, sk = x.shape[-2:]
        vis = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(vis, s, -np.inf)
    m = np.max(s, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m)
    d = e.sum(axis=axis, keepdims=True)
    return e / np.where(d == 0, 1.0, d)


# Row lengths 1, 7, 33, 4097 (single pass) and 16411 (> SINGLE_MAX: the chunked online pass).
SHAPES = [(1, 1), (3, 7), (5, 33), (2, 3, 4097), (2, 16411)]


KWS = [{}, {"scale": 0.125}, {"causal": True}, {"causal": True, "scale": 3.0}]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kw", KWS, ids=["plain", "scale", "causal", "causal-scale"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_softmax(device: str, dtype: str, kw: dict, shape: tuple) -> None:
    rng = np.random.default_rng(seed("softmax", dtype, shape, str(kw)))
    x = rand(rng, shape, dtype, scale=3.0)
    r = softmax(up(x, device), **kw)
    assert r.dtype is gp.as_dtype(dtype) and r.shape == x.shape
    assert_close(r, _ref(as64(x), **kw), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
def test_layouts_and_out(device: str, layout: str, causal: bool) -> None:
    rng = np.random.default_rng(seed("sm-lay", layout, causal))
    x = rand(rng, (2, 9, 33), "float32", scale=2.0)
    out = poisoned(x.shape, "float32", device)
    assert softmax(view(x, layout, device), causal=causal, out=out) is out
    assert_close(out, _ref(as64(x), causal=causal), "float32")
    out2 = poisoned_strided(x.shape, "float32", device)
    assert softmax(view(x, layout, device), causal=causal, out=out2) is out2
    assert_close(out2, _ref(as64(x), causal=causal), "float32")


@pytest.mark.parametrize("axis", [0, 1, -2])
def test_other_axes(device: str, axis: int) -> None:
    rng = np.random.default_rng(seed("sm-axis", axis))
    x = rand(rng, (7, 5, 33), "float32")
    r = softmax(view(x, "transposed", device), axis=axis, scale=0.5)
    assert r.is_contiguous()
    assert_close(r, _ref(as64(x), axis=axis, scale=0.5), "float32")


def test_causal_more_queries_than_keys(device: str) -> None:
    # Sq > Sk: the first Sq - Sk queries see no key and give zero rows, never NaN.
    rng = np.random.default_rng(3)
    x = rand(rng, (2, 9, 4), "float32")
    r = softmax(up(x, device), causal=True).to_numpy()
    assert not np.isnan(r).any()
    assert (r[:, :5] == 0).all()
    assert_close(r, _ref(as64(x), causal=True), "float32")


def test_all_neg_inf_rows_and_nan(device: str) -> None:
    x = np.zeros((4, 20000), np.float32)  # long rows take the chunked path too
    x[0] = -np.inf
    x[1, 3] = np.nan
    x[2] = np.linspace(-5, 5, 20000, dtype=np.float32)
    x[3, :3] = -np.inf
    for n in (20000, 7):
        xs = np.ascontiguousarray(x[:, :n])
        r = softmax(up(xs, device)).to_numpy()
        assert (r[0] == 0).all()
        assert np.isnan(r[1]).all()
        assert_close(r[2:], _ref(as64(xs[2:])), "float32")
