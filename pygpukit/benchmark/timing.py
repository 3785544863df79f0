"""Device timing for the bench CLI: CUDA events around each call, the L2 flushed before each
round, the median of the rounds (DESIGN.md's benchmark method, as the pytest suites do it).

pygpukit and the peer (torch) run on one stream, so the same events bracket either library's
work; nothing synchronizes between the flush and the timed call, so the events measure device
time, not launch latency.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import int32

__all__ = ["DeviceTimer"]

FLUSH_BYTES = 256 << 20  # larger than any Hopper L2 (50-60 MiB)


class DeviceTimer:
    """Times callables on one device and stream (which it makes current for pygpukit and, when
    torch is importable, for torch)."""

    def __init__(self, device: int = 0) -> None:
        self.device = runtime.Device("cuda", device)
        self.stream = runtime.Stream(device=device)
        runtime.set_stream(self.stream)
        self._flush: GPUArray = empty((FLUSH_BYTES // 4,), int32, self.device)
        self.torch: Any = None
        try:
            import torch

            torch.cuda.set_device(device)
            torch.cuda.set_stream(torch.cuda.ExternalStream(self.stream.handle))
            self.torch = torch
        except Exception:  # no torch, or a torch without CUDA: the peer columns stay empty
            self.torch = None

    def median_seconds(self, fn: Callable[[], Any], *, rounds: int = 30, warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(rounds):
            self._flush.fill_(0)  # cuMemsetD32Async on the stream: evicts L2
            start = runtime.Event(device=self.device.index, enable_timing=True)
            end = runtime.Event(device=self.device.index, enable_timing=True)
            start.record(self.stream)
            fn()
            end.record(self.stream)
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000.0)
        return statistics.median(times)
