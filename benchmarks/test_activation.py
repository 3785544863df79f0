"""Gated activation silu(g) * x at 16384x8192 bf16 against torch's eager silu(g) * x, and
softplus at the same size against torch.nn.functional.softplus."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
M, N = 16384, 8192
GROUP = "silu_mul 16384x8192 bf16"
BYTES = 3 * M * N * 2  # read gate and up, write the product


def test_silu_mul_pygpukit(bench: Any) -> None:
    rng = np.random.default_rng(0)
    g, u = (
        gp.from_numpy(
            rng.standard_normal((M, N), dtype=np.float32).astype(ml_dtypes.bfloat16),
            device="cuda:0",
        )
        for _ in range(2)
    )
    out = gp.empty_like(g)
    bench(lambda: gp.silu_mul(g, u, out=out), group=GROUP, bytes=BYTES)


def test_silu_mul_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    g = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    u = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    silu = torch.nn.functional.silu
    bench(lambda: silu(g) * u, group=GROUP, bytes=BYTES)


SOFTPLUS = "softplus 16384x8192 bf16"
SOFTPLUS_BYTES = 2 * M * N * 2  # read x, write y


def test_softplus_pygpukit(bench: Any) -> None:
    rng = np.random.default_rng(1)
    x = gp.from_numpy(
        rng.standard_normal((M, N), dtype=np.float32).astype(ml_dtypes.bfloat16), device="cuda:0"
    )
    out = gp.empty_like(x)
    bench(lambda: gp.softplus(x, out=out), group=SOFTPLUS, bytes=SOFTPLUS_BYTES)


def test_softplus_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    softplus = torch.nn.functional.softplus
    out = torch.empty_like(x)
    bench(lambda: softplus(x, out=out), group=SOFTPLUS, bytes=SOFTPLUS_BYTES)
