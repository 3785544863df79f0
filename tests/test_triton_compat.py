"""The 0.2.x Triton entry points run the Triton kernels (the GPU, or the interpreter in CI)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import routing
from pygpukit.triton import from_gpuarray, kernels, triton_available

pytest.importorskip("triton")
DEV = "cuda:0" if gp.is_cuda_available() else "cpu"
pytestmark = pytest.mark.skipif(
    DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or TRITON_INTERPRET=1",
)


def test_kernels_write_into_out_through_triton() -> None:
    assert triton_available()
    rng = np.random.default_rng(5)
    xh = rng.standard_normal((3, 16)).astype(np.float32)
    wh = rng.standard_normal(16).astype(np.float32)
    bh = rng.standard_normal(16).astype(np.float32)
    x, w, b = (gp.from_numpy(a, device=DEV) for a in (xh, wh, bh))
    assert from_gpuarray(x) is x
    routing.reset_stats()
    out = gp.empty_like(x)
    assert kernels.rmsnorm(x, w, out, eps=1e-5) is out
    ref = xh / np.sqrt((xh.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * wh
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-5)
    kernels.layernorm(x, w, b, out)
    xd = xh.astype(np.float64)
    ln = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * wh + bh
    np.testing.assert_allclose(out.to_numpy(), ln, rtol=1e-5, atol=1e-5)
    kernels.softmax(x, out)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    np.testing.assert_allclose(out.to_numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    xr = gp.from_numpy(rng.standard_normal((4, 2, 8)).astype(np.float32), device=DEV)
    cos, sin = gp.rope_tables(4, 8, device=DEV)
    rot = gp.empty_like(xr)
    kernels.rotary(xr, cos, sin, rot)
    np.testing.assert_allclose(rot.to_numpy(), gp.rope(xr, cos, sin).to_numpy(), rtol=1e-6)
    ran = routing.stats()
    assert all(ran[op].get("triton") for op in ("rmsnorm", "layernorm", "softmax", "rope"))


def test_from_gpuarray_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="expects a GPUArray"):
        from_gpuarray(np.zeros(3))
