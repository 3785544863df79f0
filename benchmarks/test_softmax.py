"""softmax over the last axis at 16384x8192 bf16 against torch.softmax."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
M, N = 16384, 8192
GROUP = "softmax 16384x8192 bf16"


def test_softmax_pygpukit(bench: Any) -> None:
    host = np.random.default_rng(0).standard_normal((M, N), dtype=np.float32)
    x = gp.from_numpy(host.astype(ml_dtypes.bfloat16), device="cuda:0")
    out = gp.empty_like(x)
    bench(lambda: gp.softmax(x, out=out), group=GROUP, bytes=2 * M * N * 2)


def test_softmax_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    bench(lambda: torch.softmax(x, -1), group=GROUP, bytes=2 * M * N * 2)
