"""GEMM through cuBLASLt against torch.matmul, on the same stream: bf16 8192^3 and
4096x14336x4096 (M x N x K, an MLP up-projection of a 4096-token batch), and exact fp32 8192^3
(torch with TF32 off). flops = 2*M*N*K per call; TFLOP/s = flops / median."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu

CASES = {
    "bf16 8192^3": (8192, 8192, 8192, "bfloat16"),
    "bf16 4096x14336x4096": (4096, 14336, 4096, "bfloat16"),
    "fp32 exact 8192^3": (8192, 8192, 8192, "float32"),
}


def _group(case: str) -> str:
    return f"matmul {case}"


def _flops(case: str) -> int:
    m, n, k, _ = CASES[case]
    return 2 * m * n * k


@pytest.fixture
def exact_torch() -> Iterator[Any]:
    """torch with TF32 off for fp32 products (its default, set explicitly), restored after."""
    torch = pytest.importorskip("torch")
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield torch
    torch.backends.cuda.matmul.allow_tf32 = prev


@pytest.mark.parametrize("case", list(CASES))
def test_matmul_pygpukit(bench: Any, case: str) -> None:
    m, n, k, dtype = CASES[case]
    rng = np.random.default_rng(0)
    np_dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    a = gp.from_numpy(rng.standard_normal((m, k), dtype=np.float32).astype(np_dt), device="cuda:0")
    b = gp.from_numpy(rng.standard_normal((k, n), dtype=np.float32).astype(np_dt), device="cuda:0")
    gp.set_matmul_precision("highest")
    bench(lambda: a @ b, group=_group(case), flops=_flops(case))


@pytest.mark.parametrize("case", list(CASES))
def test_matmul_torch(bench: Any, exact_torch: Any, case: str) -> None:
    torch = exact_torch
    m, n, k, dtype = CASES[case]
    dt = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    bench(lambda: torch.matmul(a, b), group=_group(case), flops=_flops(case))
