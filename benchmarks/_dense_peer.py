"""The dense bf16 peer of the quantized-product benchmarks (quantized.py, mixed_gemm.py): for
each weight shape [N, K] and row count M, a bf16 x and the times of the same-shape dense product
in the same run (gp.linear on cuBLASLt: op linear forced to the native backend, so one row is
not handed to the decode GEMV; and torch's F.linear when torch is importable)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import pygpukit as gp


def dense_peers(
    timer: Any, shapes: list[tuple[int, int]], rows: list[int]
) -> Iterator[tuple[int, int, int, gp.GPUArray, float, float | None]]:
    """(n, k, m, x [m, k] bf16, gp.linear seconds, F.linear seconds or None), shapes outer."""
    torch = timer.torch
    for n, k in shapes:
        wd = gp.from_numpy(
            np.random.default_rng(1).standard_normal((n, k)).astype(np.float32) * 0.02,
            device="cuda:0",
        ).astype("bfloat16")
        tw = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) if torch else None
        for m in rows:
            x = gp.from_numpy(
                np.random.default_rng(2).standard_normal((m, k)).astype(np.float32),
                device="cuda:0",
            ).astype("bfloat16")
            with gp.route(linear="native"):
                t_dense = timer.median_seconds(lambda x=x, wd=wd: gp.linear(x, wd))
            t_torch = None
            if torch is not None:
                tx = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                t_torch = timer.median_seconds(
                    lambda tx=tx, tw=tw: torch.nn.functional.linear(tx, tw)
                )
            yield n, k, m, x, t_dense, t_torch
