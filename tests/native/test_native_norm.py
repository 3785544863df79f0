"""Native twins of rmsnorm (incl. the fused residual) and layernorm on the GPU, through the
public ops with the route forced to native, against float64 references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp

pytestmark = pytest.mark.gpu
FLOATS = ["float32", "float16", "bfloat16", "float64"]
# Rows of 1, 7, 33 (short), 4097 (odd, long), 16411 (prime, longer than one pass of threads).
SHAPES = [(1, 1), (3, 7), (2, 5, 33), (3, 4097), (2, 16411)]


def _up(x: np.ndarray, layout: str = "contiguous") -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return gp.from_numpy(
            np.ascontiguousarray(np.swapaxes(x, -1, -2)), device="cuda:0"
        ).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return gp.from_numpy(wide, device="cuda:0")[..., ::2]
    if layout == "rows":  # every other row: read in place with a row stride
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return gp.from_numpy(tall, device="cuda:0")[::2]
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


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


@pytest.fixture(autouse=True)
def _native() -> object:
    with gp.route("rmsnorm:native,layernorm:native"):
        yield


@pytest.mark.parametrize("layout", ["contiguous", "rows", "strided", "transposed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_rmsnorm(dtype: str, shape: tuple[int, ...], layout: str) -> None:
    rng = np.random.default_rng(seed("nrms", dtype, shape, layout))
    x, w = rand(rng, shape, dtype, scale=2.0), rand(rng, shape[-1], dtype)
    out = _poison(shape, dtype)
    y = gp.rmsnorm(_up(x, layout), _up(w), 1e-6, out=out)
    assert y is out
    assert gp.routing.explain("rmsnorm", y, _up(w)).backend == "native"
    assert_close(y, _rms_ref(as64(x), as64(w), 1e-6), dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_rmsnorm_residual_and_mixed_weight(dtype: str) -> None:
    rng = np.random.default_rng(seed("nrms_res", dtype))
    x, r = rand(rng, (7, 4097), dtype), rand(rng, (7, 4097), dtype)
    w32 = rand(rng, 4097, "float32")
    y, h = gp.rmsnorm(_up(x, "rows"), _up(w32), 1e-6, residual=_up(r, "transposed"))
    h_ref = (as64(x) + as64(r)).astype(np.float32).astype(x.dtype)
    np.testing.assert_array_equal(h.to_numpy(), h_ref)
    assert_close(y, _rms_ref(as64(h_ref), as64(w32), 1e-6), dtype)


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_layernorm(dtype: str, shape: tuple[int, ...], affine: str) -> None:
    rng = np.random.default_rng(seed("nln", dtype, shape, affine))
    x = (as64(rand(rng, shape, dtype)) + 3.0).astype(rand(rng, 1, dtype).dtype)
    w = rand(rng, shape[-1], dtype) if affine in ("both", "weight") else None
    b = rand(rng, shape[-1], "float32") if affine in ("both", "bias") else None
    out = _poison(shape, dtype)
    y = gp.layernorm(
        _up(x, "strided"), None if w is None else _up(w), None if b is None else _up(b), out=out
    )
    ref = _ln_ref(as64(x), None if w is None else as64(w), None if b is None else as64(b), 1e-5)
    assert_close(y, ref, dtype)


def test_zero_rows_and_noncontiguous_out() -> None:
    x = gp.from_numpy(np.zeros((0, 8), np.float32), device="cuda:0")
    w = gp.from_numpy(np.ones(8, np.float32), device="cuda:0")
    assert gp.rmsnorm(x, w).shape == (0, 8)
    rng = np.random.default_rng(5)
    a = rand(rng, (6, 9), "float32")
    wide = _poison((6, 18), "float32")
    y = gp.rmsnorm(_up(a), _up(np.ones(9, np.float32)), 1e-6, out=wide[:, ::2])
    assert_close(y, _rms_ref(as64(a), np.ones(9), 1e-6), "float32")
