"""Public layernorm and rmsnorm on the test device (ops._helpers.DEVICE, CPU by default; incl. the
fused residual form)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import LAYOUTS, poisoned, up, view


def _rms_ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    ms = np.array([math.fsum(r * r) / r.size for r in x.reshape(-1, x.shape[-1])])
    return x / np.sqrt(ms.reshape((*x.shape[:-1], 1)) + eps) * w


def _ln_ref(x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float) -> np.ndarray:
    rows = x.reshape(-1, x.shape[-1])
    mu = np.array([math.fsum(r) / r.size for r in rows])[:, None]
    var = np.array([math.fsum((r - m) ** 2) / r.size for r, m in zip(rows, mu, strict=True)])
    y = ((rows - mu) / np.sqrt(var[:, None] + eps)).reshape(x.shape)
    return y * (1.0 if w is None else w) + (0.0 if b is None else b)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rmsnorm(dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed("rms", dtype, layout))
    a, w = rand(rng, (2, 7, 257), dtype, scale=2.0), rand(rng, 257, dtype)
    out = poisoned((2, 7, 257), dtype)
    r = gp.rmsnorm(view(a, layout), up(w), 1e-6, out=out)
    assert r is out
    assert_close(r, _rms_ref(as64(a), as64(w), 1e-6), dtype)
    # float32 weights with bf16 activations: the result keeps x's dtype.
    w32 = rand(rng, 257, "float32")
    r = gp.rmsnorm(view(a, layout), up(w32), eps=1e-5)
    assert r.dtype is gp.as_dtype(dtype)
    assert_close(r, _rms_ref(as64(a), as64(w32), 1e-5), dtype)


def test_rmsnorm_residual() -> None:
    rng = np.random.default_rng(2)
    a, res, w = (
        rand(rng, (7, 4097), "bfloat16"),
        rand(rng, (7, 4097), "bfloat16"),
        rand(rng, 4097, "bfloat16"),
    )
    y, h = gp.rmsnorm(view(a, "strided"), up(w), 1e-6, residual=view(res, "transposed"))
    assert y.dtype is h.dtype is gp.bfloat16
    h_ref = (as64(a) + as64(res)).astype(np.float32).astype(h.dtype.np_dtype)
    np.testing.assert_array_equal(h.to_numpy(), h_ref)
    assert_close(y, _rms_ref(as64(h_ref), as64(w), 1e-6), "bfloat16")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layernorm(affine: str, layout: str) -> None:
    rng = np.random.default_rng(seed("ln", affine, layout))
    a = (as64(rand(rng, (5, 7, 129), "float16")) + 3.0).astype(np.float16)
    w = rand(rng, 129, "float16") if affine != "none" else None
    b = rand(rng, 129, "float16") if affine == "both" else None
    out = poisoned((5, 7, 129), "float16")
    r = gp.layernorm(
        view(a, layout), None if w is None else up(w), None if b is None else up(b), out=out
    )
    assert r is out
    ref = _ln_ref(as64(a), None if w is None else as64(w), None if b is None else as64(b), 1e-5)
    assert_close(r, ref, "float16")


def test_errors() -> None:
    x = up(np.ones((4, 8), np.float32))
    with pytest.raises(
        ValueError, match=r"^rmsnorm: weight has shape \(7,\) but x's last dim is 8"
    ):
        gp.rmsnorm(x, up(np.ones(7, np.float32)))
    with pytest.raises(ValueError, match=r"layernorm: bias has shape \(4,\) but x's last dim is 8"):
        gp.layernorm(x, up(np.ones(8, np.float32)), up(np.ones(4, np.float32)))
    with pytest.raises(TypeError, match=r"rmsnorm: x must be a float16/bfloat16.*int32"):
        gp.rmsnorm(up(np.ones((2, 8), np.int32)), up(np.ones(8, np.float32)))
    with pytest.raises(TypeError, match="rmsnorm: weight must be a GPUArray, got ndarray"):
        gp.rmsnorm(x, np.ones(8, np.float32))
    with pytest.raises(ValueError, match=r"rmsnorm: residual has shape \(4, 7\)"):
        gp.rmsnorm(x, up(np.ones(8, np.float32)), residual=up(np.ones((4, 7), np.float32)))
    with pytest.raises(ValueError, match="out= is not supported with residual="):
        gp.rmsnorm(x, up(np.ones(8, np.float32)), residual=x, out=x)
    with pytest.raises(ValueError, match="rmsnorm: eps must be a non-negative number"):
        gp.rmsnorm(x, up(np.ones(8, np.float32)), eps=-1.0)
