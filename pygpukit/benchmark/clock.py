"""A device clock for pytest-benchmark (``--benchmark-timer pygpukit.benchmark.clock.device``).

pytest-benchmark measures ``end - start`` of two timer readings around the timed call. Each
reading here records a CUDA event on the current stream and returns a stamp; subtracting two
stamps waits for the later event and returns the device time between them in seconds. Nothing
synchronizes before the timed call, so the host never leaves the device idle between the events
when a setup step (an L2 flush) keeps it busy: the result is device time, not launch latency.

Without a CUDA device the stamps fall back to ``time.perf_counter``.
"""

from __future__ import annotations

import time
from typing import Any

from pygpukit import runtime


class Stamp:
    __slots__ = ("event", "host")

    def __init__(self, event: Any, host: float) -> None:
        self.event = event
        self.host = host

    def __sub__(self, other: Stamp) -> float:
        if self.event is None or other.event is None:
            return self.host - other.host
        self.event.synchronize()
        ms: float = other.event.elapsed_time(self.event)
        return ms / 1000.0

    def __float__(self) -> float:
        return self.host


def device() -> Stamp:
    dev = runtime.default_device()
    if dev.type != "cuda":
        return Stamp(None, time.perf_counter())
    ev = runtime.Event(device=dev.index, enable_timing=True)
    ev.record(runtime.current_stream(dev))
    return Stamp(ev, time.perf_counter())
