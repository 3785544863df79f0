"""CUDA graphs: record the work pygpukit queues on one stream once, replay it with one launch.

    g = gp.CUDAGraph()
    with g.capture():            # a new stream beside the current one (or stream=...)
        out = step(x)            # ops are recorded, not run
    x[:] = next_input            # inputs: written into the same device arrays, outside capture
    g.replay()                   # on the current stream; out holds the result afterwards

What a replay does: exactly the launches and device copies recorded, on the same addresses with
the same Python-level arguments (shapes, scalars, routing decisions, launch grids). Values that
change between replays must live in device memory that the captured kernels read (token ids,
positions, lengths: the decode kernels read lengths from device memory for this reason).

Rules (each one raises with its reason; gp.CaptureError, a RuntimeError, where the work itself can
never be recorded, so that retrying it inside a capture cannot succeed):
- Capture records instead of running: arrays computed inside the block hold nothing until
  replay(), and host copies (from_numpy, to_numpy, x[:] = numpy) on the capturing stream are
  refused (CaptureError), since a replay would reread a host buffer that no longer holds those
  bytes.
- Warm up first: a call's first run compiles kernels and sizes workspaces; run the step once
  outside capture so the recording is the steady state.
- Arrays allocated inside the block get real memory (on a side stream, allocated at capture
  time) that the graph keeps until reset() or collection, whatever happens to the arrays: every
  replay writes to the same addresses. Outputs allocated there may be kept and read after each
  replay. Memory released while any capture is in progress (an array made before the capture
  and replaced inside it, too) is not freed until the graphs being captured are gone (the Rust
  core holds those frees), so memory freed inside the block is not reused within it.
- The block runs on one stream: switching the current stream inside it raises CaptureError (the
  other stream's work would run at once, on arrays the capture has not filled).
- One capture per stream at a time, on a created stream (never the default stream). Capture is
  in relaxed mode: other threads keep working, though a device-wide synchronize (theirs, or the
  allocator's out-of-memory retry) invalidates the capture, which then raises.

Routing statistics (gp.routing.stats) count what ran: the op calls made inside the block are
taken back out at the end of the capture (they were recorded, not run) and added once per
replay, by the backend that was chosen at capture.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pygpukit import runtime
from pygpukit.errors import CaptureError
from pygpukit.routing.select import _stats

__all__ = ["CUDAGraph", "is_capturing"]


class _CapturePool:
    """Allocation target while a stream captures: real memory from the context's pool, allocated
    on a side stream and synchronized at once (a captured allocation would only exist during a
    replay), kept alive by the graph."""

    __slots__ = ("kept", "pool", "scratch", "side")

    def __init__(self, pool: Any, side: Any, kept: list[Any]) -> None:
        self.pool, self.side, self.kept = pool, side, kept
        self.scratch: dict[Any, Any] = {}  # per-capture workspaces (backends/_support/scratch.py)

    def allocate(self, nbytes: int, stream: Any = None) -> Any:
        buf = self.pool.allocate(nbytes, self.side)
        self.side.synchronize()  # capture time only: the memory exists before any replay
        self.kept.append(buf)
        return buf


def is_capturing(device: Any = None) -> bool:
    """True while this thread is inside ``CUDAGraph.capture()`` for ``device``."""
    dev = runtime.default_device() if device is None else runtime.device(device)
    return runtime.capture_pool(dev) is not None


class CUDAGraph:
    """One captured sequence of pygpukit work on a device, replayed with ``replay()``."""

    def __init__(self, device: Any = None) -> None:
        dev = runtime.default_device() if device is None else runtime.device(device)
        if dev.type != "cuda":
            raise CaptureError(f"CUDA graphs need a CUDA device, got {dev}")
        self.device = dev
        self._graph: Any = None
        self._kept: list[Any] = []  # buffers allocated during capture (see _CapturePool)
        self._side: Any = None
        self._replayed: dict[int, Any] = {}  # streams that replayed, by handle
        # The stream recorded on: it keeps its SM partition (green context), which the
        # recorded kernels run on, alive as long as the graph.
        self._recorded_on: Any = None
        self._routes: list[tuple[str, str, int]] = []  # (op, backend, calls) of one replay

    @property
    def captured(self) -> bool:
        return self._graph is not None

    @property
    def kept_bytes(self) -> int:
        """Bytes of device memory allocated during capture that the graph keeps alive."""
        return sum(int(b.nbytes) for b in self._kept)

    @contextmanager
    def capture(self, stream: Any = None) -> Iterator[CUDAGraph]:
        """Record the pygpukit work of the block on ``stream`` (default: a new stream that runs
        where the current stream does, so a capture inside a scheduler context with an SM
        partition records kernels of that partition)."""
        if self._graph is not None:
            raise RuntimeError("this CUDAGraph already holds a capture: call reset() first")
        dev = self.device
        if runtime.capture_pool(dev) is not None:
            raise RuntimeError(f"this thread is already capturing a CUDA graph on {dev}")
        s = runtime.current_stream(dev).sibling() if stream is None else stream
        if not isinstance(s, runtime.Stream) or s.device != dev.index:
            raise ValueError(f"capture needs a pygpukit Stream of {dev}, got {s!r}")
        pool = runtime.alloc_target(dev)[0]
        self._side = runtime.Stream(device=dev.index)
        s.begin_capture()
        runtime.begin_capture(dev, s, _CapturePool(pool, self._side, self._kept))
        counted = {op: dict(by) for op, by in _stats.items()}
        done = False
        try:
            yield self
            done = True
        finally:
            runtime.end_capture(dev)
            self._routes = _take_back(counted)
            try:
                graph = s.end_capture()
            except Exception:
                if done:  # the body succeeded but the capture did not (e.g. it was invalidated)
                    self._kept.clear()
                    raise
                graph = None  # the body's own error is the one to report
            if done:
                self._graph = graph
                self._recorded_on = s
            else:
                self._kept.clear()  # nothing ran: the memory can go at once

    def replay(self, stream: Any = None) -> None:
        """Launch the captured work on ``stream`` (default: the current stream of the device)."""
        if self._graph is None:
            raise RuntimeError("nothing captured: use `with graph.capture(): ...` first")
        s = runtime.current_stream(self.device) if stream is None else stream
        pacer = runtime.launch_gate(self.device)
        if pacer is None:
            self._graph.launch(s)
        else:  # a scheduler context's launch gate (pygpukit.scheduler)
            runtime.gated(pacer, s, self._graph.launch, s)
        self._replayed[s.handle] = s
        for op, backend, n in self._routes:
            _stats[op][backend] += n

    def reset(self) -> None:
        """Drop the capture and release the memory it kept, once the work queued so far on the
        streams that replayed it and on the current stream (which may still read its outputs) is
        done: the side stream waits for them; nothing blocks the host."""
        if runtime.capture_pool(self.device) is not None:
            raise RuntimeError(
                "reset() while this thread is capturing a CUDA graph: its waits and frees would "
                "be recorded into that graph; reset after the capture"
            )
        if self._kept and self._side is not None:
            streams = {**self._replayed}
            cur = runtime.current_stream(self.device)
            streams[cur.handle] = cur
            for s in streams.values():
                ev = runtime.Event(device=self.device.index)
                ev.record(s)
                self._side.wait_event(ev)
        self._graph = None
        self._recorded_on = None
        self._kept.clear()
        self._replayed.clear()
        self._routes = []

    def __del__(self) -> None:
        try:
            if runtime.capture_pool(self.device) is not None:
                # Collected during another capture: keep the memory for the process rather
                # than record waits and frees into that graph.
                _orphans.append((self._graph, self._kept))
                return
            self.reset()
        except Exception:  # interpreter shutdown: the driver may be gone already
            pass

    def __repr__(self) -> str:
        state = "captured" if self._graph is not None else "empty"
        return f"CUDAGraph({self.device}, {state}, kept {self.kept_bytes} bytes)"


def _take_back(before: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    """The op calls counted since ``before`` (made inside a capture: recorded, not run), taken
    back out of the routing statistics; each replay adds them again."""
    calls = []
    for op, by in _stats.items():
        for backend, n in by.items():
            k = n - before.get(op, {}).get(backend, 0)
            if k > 0:  # (a reset_stats() inside the block leaves nothing to take back)
                by[backend] = n - k
                calls.append((op, backend, k))
    return calls


# Graphs collected while this process was capturing another one (CUDAGraph.__del__).
_orphans: list[tuple[Any, list[Any]]] = []
