"""Allocation round trip from Python: gp.empty + release vs torch.empty + del, same run.

Target: median <= 2.5 us per empty+release and within 1.5x of torch.
"""

from __future__ import annotations

import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
SHAPE = (1 << 18,)  # 1 MiB of float32: a cached size after the warm-up
ITERS, ROUNDS = 2000, 30


def _run(benchmark, fn) -> None:  # type: ignore[no-untyped-def]
    for _ in range(100):
        fn()
    benchmark.pedantic(fn, iterations=ITERS, rounds=ROUNDS, warmup_rounds=2)


def test_alloc_pygpukit(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "alloc: empty + release, 1 MiB"
    dev = gp.device("cuda:0")
    f32 = gp.float32

    def fn() -> None:
        a = gp.empty(SHAPE, f32, dev)
        del a

    _run(benchmark, fn)


def test_alloc_torch(benchmark) -> None:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    benchmark.group = "alloc: empty + release, 1 MiB"
    dev = torch.device("cuda:0")

    def fn() -> None:
        t = torch.empty(SHAPE, dtype=torch.float32, device=dev)
        del t

    _run(benchmark, fn)
