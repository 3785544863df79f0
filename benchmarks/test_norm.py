"""rmsnorm and layernorm at 16384x8192 bf16 against F.rms_norm / F.layer_norm, and the host cost
of back-to-back small calls (1x4096 bf16)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
M, N = 16384, 8192
BYTES = 2 * M * N * 2  # read x, write y (bf16); the weight is noise


def _inputs(m: int, n: int) -> tuple[gp.GPUArray, gp.GPUArray, gp.GPUArray]:
    rng = np.random.default_rng(0)

    def bf16(*shape: int) -> gp.GPUArray:
        host = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
        return gp.from_numpy(host, device="cuda:0")

    return bf16(m, n), bf16(n), bf16(n)


def test_rmsnorm_pygpukit(bench: Any) -> None:
    x, w, _ = _inputs(M, N)
    out = gp.empty_like(x)
    bench(lambda: gp.rmsnorm(x, w, 1e-6, out=out), group="rmsnorm 16384x8192 bf16", bytes=BYTES)


def test_rmsnorm_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    f = torch.nn.functional.rms_norm
    bench(lambda: f(x, (N,), w, 1e-6), group="rmsnorm 16384x8192 bf16", bytes=BYTES)


def test_layernorm_pygpukit(bench: Any) -> None:
    x, w, b = _inputs(M, N)
    out = gp.empty_like(x)
    bench(
        lambda: gp.layernorm(x, w, b, 1e-5, out=out), group="layernorm 16384x8192 bf16", bytes=BYTES
    )


def test_layernorm_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    f = torch.nn.functional.layer_norm
    bench(lambda: f(x, (N,), w, b, 1e-5), group="layernorm 16384x8192 bf16", bytes=BYTES)
