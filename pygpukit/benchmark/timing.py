"""Device timing for the bench CLI: CUDA events around each call, the L2 flushed before each
round, the median of the rounds (docs/design.md's benchmark method, as the pytest suites do it).

pygpukit and the peer (torch) run on one stream, so the same events bracket either library's
work; nothing synchronizes between the flush and the timed call, so the events measure device
time, not launch latency.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from pygpukit import _core, runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty, zeros
from pygpukit.dtypes import int32, uint8
from pygpukit.ops import reduce as _reduce

__all__ = ["DeviceTimer", "L2Flush", "replay_seconds"]

FLUSH_BYTES = 256 << 20  # larger than any Hopper L2 (50-60 MiB)


class L2Flush:
    """Evicts the L2 before a timed call by READING a buffer larger than any L2 (one max
    reduction on the current stream, no host sync).

    Why a read and not a memset: a write leaves up to an L2's worth of dirty lines (50-60 MiB on
    Hopper), and their write-back then lands inside the next timed call. Measured on an H200
    (docs/benchmark-notes.md, 2026-11-21): after a 256 MiB memset a 64 MiB copy took 36.3 us and
    batch-1 decode attention over 32768 keys 49.8 us; after this read flush 32.9 and 41.3 us (the
    1 GiB copy, 504-508 us, hardly moves). Both libraries of a comparison get the same flush.
    """

    def __init__(self, device: Any) -> None:
        self._buf: GPUArray = zeros((FLUSH_BYTES // 4,), int32, device)
        self._sink: GPUArray = empty((), int32, device)

    def __call__(self) -> None:
        _reduce.max(self._buf, out=self._sink)


def replay_seconds(
    graph: Any,
    stream: Any,
    reps: int,
    *,
    warmup: int = 3,
    before: Callable[[], None] | None = None,
) -> float:
    """Device seconds per replay of a captured CUDA graph on ``stream``: ``warmup`` replays,
    then ``reps`` back to back between two events. ``before`` runs on the host ahead of every
    replay (writing the graph's inputs, say); what it enqueues is timed with the replays."""

    def once() -> None:
        if before is not None:
            before()
        graph.replay(stream)

    for _ in range(warmup):
        once()
    a = runtime.Event(device=stream.device, enable_timing=True)
    b = runtime.Event(device=stream.device, enable_timing=True)
    a.record(stream)
    for _ in range(reps):
        once()
    b.record(stream)
    b.synchronize()
    return float(a.elapsed_time(b)) / 1000.0 / reps


class DeviceTimer:
    """Times callables on one device and stream (which it makes current for pygpukit and, when
    torch is importable, for torch)."""

    def __init__(self, device: int = 0) -> None:
        self.device = runtime.Device("cuda", device)
        self.stream = runtime.Stream(device=device)
        runtime.set_stream(self.stream)
        self._flush = L2Flush(self.device)
        self.torch: Any = None
        try:
            import torch

            torch.cuda.set_device(device)
            torch.cuda.set_stream(torch.cuda.ExternalStream(self.stream.handle))
            self.torch = torch
        except Exception:  # no torch, or a torch without CUDA: the peer columns stay empty
            self.torch = None

    def median_seconds(
        self,
        fn: Callable[[], Any],
        *,
        rounds: int = 30,
        warmup: int = 3,
        flush: Callable[[], Any] | None = None,
    ) -> float:
        """Median device seconds of fn; flush (default: the L2Flush) runs before each round."""
        evict = self._flush if flush is None else flush
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(rounds):
            evict()
            start = runtime.Event(device=self.device.index, enable_timing=True)
            end = runtime.Event(device=self.device.index, enable_timing=True)
            start.record(self.stream)
            fn()
            end.record(self.stream)
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000.0)
        return statistics.median(times)

    def copy_rate(self, nbytes: int = 1 << 30) -> float:
        """Device-to-device copy bandwidth in GB/s (bytes read + written), the ceiling the
        bandwidth-bound benchmarks are reported against."""
        src = empty((nbytes,), uint8, self.device)
        dst = empty((nbytes,), uint8, self.device)
        t = self.median_seconds(
            lambda: _core.memcpy_dtod(dst.data_ptr(), src.data_ptr(), nbytes, self.stream)
        )
        return 2 * nbytes / t / 1e9
