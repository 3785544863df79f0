"""Neox RoPE on x [T=4096, H=32, D=128] bf16 (fp32 tables) against torch eager and torch.compile."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
T, H, D = 4096, 32, 128
GROUP = "rope T4096 H32 D128 bf16"
BYTES = 2 * T * H * D * 2  # read x, write y (the 2 MiB of tables are not counted)


def test_rope_pygpukit(bench: Any) -> None:
    host = np.random.default_rng(0).standard_normal((T, H, D), dtype=np.float32)
    x = gp.from_numpy(host.astype(ml_dtypes.bfloat16), device="cuda:0")
    cos, sin = gp.rope_tables(T, D, device="cuda:0")
    out = gp.empty_like(x)
    bench(lambda: gp.rope(x, cos, sin, out=out), group=GROUP, bytes=BYTES)


def _torch_rope(torch: Any) -> Any:
    def rope(x: Any, cos: Any, sin: Any) -> Any:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)

    return rope


def _torch_inputs(torch: Any) -> tuple[Any, Any, Any]:
    x = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16)
    inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
    ang = torch.arange(T, device="cuda", dtype=torch.float32)[:, None] * inv[None, :]
    return x, ang.cos(), ang.sin()


def test_rope_torch_eager(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x, c, s = _torch_inputs(torch)
    f = _torch_rope(torch)
    bench(lambda: f(x, c, s), group=GROUP, bytes=BYTES)


def test_rope_torch_compile(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x, c, s = _torch_inputs(torch)
    f = torch.compile(_torch_rope(torch))
    bench(lambda: f(x, c, s), group=GROUP, bytes=BYTES)
