"""Shared benchmark fixtures: one stream for pygpukit and torch, an L2 flush, and ``bench``.

Run with the device clock so times are device time between CUDA events:
    pytest benchmarks --benchmark-enable --benchmark-timer pygpukit.benchmark.clock.device
pygpukit and torch run on the same stream (torch wraps pygpukit's as an ExternalStream), so the
events bracket exactly the timed work of either library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pygpukit as gp
from pygpukit import _core
from pygpukit.benchmark.timing import L2Flush


@pytest.fixture(scope="session")
def shared_stream() -> Iterator[Any]:
    if not gp.is_cuda_available():
        pytest.skip("no CUDA device")
    s = gp.Stream(device=0)
    gp.set_stream(s)
    try:
        import torch

        torch.cuda.set_stream(torch.cuda.ExternalStream(s.handle))
    except ImportError:
        pass
    yield s


@pytest.fixture(scope="session")
def flush(shared_stream: Any) -> Callable[[], None]:
    # A read of 256 MiB on the shared stream: evicts L2 without leaving dirty lines whose
    # write-back would be charged to the timed call (L2Flush), and keeps the device busy.
    return L2Flush(gp.device("cuda:0"))


@pytest.fixture
def bench(benchmark: Any, flush: Callable[[], None]) -> Callable[..., Any]:
    """bench(fn, group=..., bytes=..., flops=..., calls=..., rounds=..., iterations=...).

    bytes/flops are per timed call of fn; calls is how many op calls fn makes (for per-call
    host cost)."""

    def run(
        fn: Callable[[], Any],
        *,
        group: str,
        bytes: int = 0,
        flops: int = 0,
        calls: int = 1,
        rounds: int = 30,
        iterations: int = 1,
        flush_l2: bool = True,
    ) -> Any:
        benchmark.group = group
        benchmark.extra_info.update(bytes=bytes, flops=flops, calls=calls)
        for _ in range(3):
            fn()
        return benchmark.pedantic(
            fn,
            setup=flush if flush_l2 else None,
            rounds=rounds,
            iterations=iterations,
            warmup_rounds=1,
        )

    return run


@pytest.fixture
def copy_ceiling(bench: Callable[..., Any]) -> Callable[[], None]:
    """copy_ceiling() times the 1 GiB device-to-device copy in group "copy 1 GiB", the ceiling
    that .ci/gpu/summary.py's %copy column divides by. Every bandwidth file runs it, so each
    file also stands alone (the summary keeps the best of the run)."""

    def run() -> None:
        n = 1 << 30
        a = gp.empty((n,), gp.uint8, device="cuda:0")
        b = gp.empty((n,), gp.uint8, device="cuda:0")
        s = gp.current_stream("cuda:0")
        copy = lambda: _core.memcpy_dtod(b.data_ptr(), a.data_ptr(), n, s)  # noqa: E731
        bench(copy, group="copy 1 GiB", bytes=2 * n, rounds=20)

    return run
