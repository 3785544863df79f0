"""The 0.2.x Triton call forms of docs/api-0.2.md, from ``pygpukit.triton``, on the CPU device (the
Triton interpreter; conftest sets TRITON_INTERPRET=1 without a GPU): each kernel writes every
element of ``out`` (poisoned with NaN first) and returns it, on odd shapes."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.triton
from pygpukit.compat import triton as compat_triton
from pygpukit.triton import from_gpuarray, kernels, triton_available

pytest.importorskip("triton")
DEV = "cuda:0" if gp.is_cuda_available() else "cpu"
pytestmark = pytest.mark.skipif(
    DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or TRITON_INTERPRET=1",
)


def _poisoned(shape: tuple[int, ...]) -> gp.GPUArray:
    return gp.from_numpy(np.full(shape, np.nan, np.float32), device=DEV)


def test_same_objects_from_both_paths() -> None:
    assert pygpukit.triton.kernels is compat_triton.kernels is kernels
    assert pygpukit.triton.__all__ == ["triton_available", "from_gpuarray", "kernels"]


def test_call_forms_write_into_out() -> None:
    assert triton_available() is True
    rng = np.random.default_rng(11)
    xh = rng.standard_normal((7, 33)).astype(np.float32)
    wh, bh = rng.standard_normal(33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    x, w, b = (gp.from_numpy(a, device=DEV) for a in (xh, wh, bh))
    xt = from_gpuarray(x)
    xd = xh.astype(np.float64)

    out = _poisoned(xh.shape)
    assert kernels.rmsnorm(xt, w, out, eps=1e-6) is out
    ref = xd / np.sqrt((xd**2).mean(-1, keepdims=True) + 1e-6) * wh
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-5)

    out = _poisoned(xh.shape)
    assert kernels.layernorm(x, w, b, out, eps=1e-5) is out
    ln = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.to_numpy(), ln * wh + bh, rtol=1e-5, atol=1e-5)

    out = _poisoned(xh.shape)
    assert kernels.softmax(x, out) is out
    e = np.exp(xd - xd.max(-1, keepdims=True))
    np.testing.assert_allclose(out.to_numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)

    xr = gp.from_numpy(rng.standard_normal((5, 3, 16)).astype(np.float32), device=DEV)
    cos, sin = gp.rope_tables(5, 16, device=DEV)
    out = _poisoned((5, 3, 16))
    assert kernels.rotary(xr, cos, sin, out) is out
    np.testing.assert_allclose(
        out.to_numpy(), gp.rope(xr, cos, sin).to_numpy(), rtol=1e-6, atol=1e-6
    )
