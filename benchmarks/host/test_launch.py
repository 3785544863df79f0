"""Host cost of back-to-back small calls from Python (routing + launch), wall clock:
gp.rmsnorm vs F.rms_norm at 1x4096 bf16. Target: <= 10 us per call and within 1.5x of torch."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
CALLS = 1000
GROUP = "host overhead: 1000 x rmsnorm 1x4096 bf16"


def test_rmsnorm_host_overhead_pygpukit(bench: Any) -> None:
    rng = np.random.default_rng(0)
    x = gp.from_numpy(rng.standard_normal((1, 4096)).astype(ml_dtypes.bfloat16), device="cuda:0")
    w = gp.from_numpy(rng.standard_normal(4096).astype(ml_dtypes.bfloat16), device="cuda:0")

    def calls() -> None:
        for _ in range(CALLS):
            gp.rmsnorm(x, w, 1e-6)

    bench(
        calls,
        group="host overhead: 1000 x rmsnorm 1x4096 bf16",
        calls=CALLS,
        rounds=15,
        flush_l2=False,
    )


def test_rmsnorm_host_overhead_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    f = torch.nn.functional.rms_norm

    def calls() -> None:
        for _ in range(CALLS):
            f(x, (4096,), w, 1e-6)

    bench(
        calls,
        group="host overhead: 1000 x rmsnorm 1x4096 bf16",
        calls=CALLS,
        rounds=15,
        flush_l2=False,
    )
