"""Devices, streams, events, execution contexts and memory: a thin facade over the Rust core.

Every op runs on the *current stream* of its device. Unless the user says otherwise that is a
pygpukit-created non-blocking stream per device (never the legacy default stream by accident).
``with gp.stream(s):`` switches it for the current thread.

An *execution context* (``gp.Context``) is a named VRAM budget: its own memory pool (with a quota)
and its own stream. All contexts share the device's primary CUDA context, so pointers pass freely
between them and to torch / Triton / CuPy. The ``default`` context has no quota.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from pygpukit import _core
from pygpukit.errors import CaptureError

Stream = _core.Stream
Event = _core.Event
Pool = _core.Pool

__all__ = [
    "Device",
    "Stream",
    "Event",
    "Pool",
    "Context",
    "device",
    "device_count",
    "is_cuda_available",
    "default_device",
    "set_default_device",
    "current_stream",
    "set_stream",
    "stream",
    "current_context",
    "context",
    "synchronize",
    "memory_stats",
    "empty_cache",
    "get_device_properties",
]


class Device:
    """A device: ``cuda:<index>`` or ``cpu``. Instances are interned."""

    __slots__ = ("_props", "index", "type")
    _interned: ClassVar[dict[tuple[str, int], Device]] = {}

    type: str
    index: int
    _props: dict[str, Any] | None

    def __new__(cls, type: str, index: int = 0) -> Device:
        if type not in ("cuda", "cpu"):
            raise ValueError(f"unknown device type {type!r}; expected 'cuda' or 'cpu'")
        if type == "cpu":
            index = 0
        key = (type, int(index))
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            object.__setattr__(dev, "type", type)
            object.__setattr__(dev, "index", int(index))
            object.__setattr__(dev, "_props", None)
            cls._interned[key] = dev
        return dev

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Device is immutable")

    @property
    def core_index(self) -> int:
        """Ordinal for the Rust core: the CUDA ordinal, or -1 for the host."""
        return self.index if self.type == "cuda" else -1

    @property
    def properties(self) -> dict[str, Any]:
        if self.type == "cpu":
            return {"name": "cpu", "cpu_count": os.cpu_count()}
        props = self._props
        if props is None:
            props = _core.device_properties(self.index)
            object.__setattr__(self, "_props", props)
        return dict(props)

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"device('{self}')"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self.type, self.index))


CPU = Device("cpu")
_cuda_count: int | None = None


def device_count() -> int:
    """Number of CUDA devices (0 when no driver or no device is present)."""
    global _cuda_count
    if _cuda_count is None:
        _cuda_count = _core.device_count()
    return _cuda_count


def is_cuda_available() -> bool:
    return device_count() > 0


def device(spec: Any = None) -> Device:
    """Parse ``"cuda"``, ``"cuda:1"``, ``"cpu"``, an int ordinal or a Device; None -> default."""
    if spec is None:
        return default_device()
    if isinstance(spec, Device):
        dev = spec
    elif isinstance(spec, int) and not isinstance(spec, bool):
        dev = Device("cuda", spec)
    elif isinstance(spec, str):
        kind, _, idx = spec.strip().partition(":")
        if kind not in ("cuda", "cpu") or (idx and not idx.isdigit()):
            raise ValueError(f"invalid device {spec!r}; expected 'cpu', 'cuda' or 'cuda:N'")
        dev = Device(kind, int(idx) if idx else 0)
    else:
        raise TypeError(f"invalid device {spec!r} of type {type(spec).__name__}")
    if dev.type == "cuda" and dev.index >= device_count():
        ok, reason = _core.driver_status()
        why = reason if not ok else f"{device_count()} CUDA device(s) present"
        raise _core.NoDeviceError(f"device {dev} is not available: {why}")
    return dev


_default: Device | None = None


_parse_device = device


def default_device() -> Device:
    """cuda:0 when a GPU is present, else cpu (PYGPUKIT_DEVICE or set_default_device override)."""
    global _default
    if _tls.contexts:  # inside `with ctx:` factories default to the context's device
        return _tls.contexts[-1].device
    if _default is None:
        env = os.environ.get("PYGPUKIT_DEVICE")
        _default = device(env) if env else (Device("cuda", 0) if is_cuda_available() else CPU)
    return _default


def set_default_device(spec: Any) -> None:
    global _default
    _default = device(spec)


class Context:
    """A named execution context on one device: a memory pool with an optional quota and a stream.

    ``with ctx:`` (or ``with gp.context(ctx):``) makes it current on this thread: arrays made
    inside draw from its pool, and its stream becomes the current stream.
    """

    def __init__(
        self,
        name: str,
        max_vram: int | None = None,
        device: Any = None,
        priority: int = 0,
        enable_eviction: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"context name must be a non-empty string, got {name!r}")
        if max_vram is not None and (not isinstance(max_vram, int) or max_vram < 0):
            raise ValueError(f"max_vram must be a non-negative int or None, got {max_vram!r}")
        self.name = name
        self.device = _parse_device(device)
        self.pool = Pool(
            device=self.device.core_index,
            name=name,
            quota=max_vram,
            enable_eviction=enable_eviction,
        )
        self.stream = Stream(device=self.device.core_index, priority=priority)

    @property
    def max_vram(self) -> int | None:
        quota: int | None = self.pool.quota
        return quota

    def memory_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.pool.stats()
        return stats

    def __enter__(self) -> Context:
        _tls.contexts.append(self)
        _tls.targets.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _tls.contexts
        _tls.targets.clear()
        if stack and stack[-1] is self:
            stack.pop()
        else:  # exits out of order: remove this context wherever it is
            stack.remove(self)

    def __repr__(self) -> str:
        return f"Context({self.name!r}, max_vram={self.max_vram}, device='{self.device}')"


_default_contexts: dict[Device, Context] = {}
_lock = threading.Lock()


def _default_context(dev: Device) -> Context:
    ctx = _default_contexts.get(dev)
    if ctx is None:
        with _lock:
            ctx = _default_contexts.get(dev)
            if ctx is None:
                ctx = Context("default", None, dev)
                _default_contexts[dev] = ctx
    return ctx


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.streams: dict[Device, Any] = {}
        self.contexts: list[Context] = []
        # (pool, stream) per device for this thread's current contexts and streams: the
        # allocation and launch hot paths read this one dict; any change above clears it.
        self.targets: dict[Device, tuple[Any, Any]] = {}
        # Per device while this thread captures a CUDA graph (pygpukit.graphs): (allocation
        # target, the stream entry the capture replaced, the capturing stream).
        self.captures: dict[Device, tuple[Any, Any, Any]] = {}


_tls = _ThreadState()


def alloc_target(dev: Device) -> tuple[Any, Any]:
    """(pool, stream) that allocations and launches on ``dev`` use on this thread."""
    t = _tls.targets.get(dev)
    if t is None:
        cap = _tls.captures.get(dev)
        # Capturing: the pool is graphs._CapturePool (memory must exist outside the graph; it
        # allocates on its side stream), the stream stays the capturing one for launches.
        t = (_pool_for(dev) if cap is None else cap[0], current_stream(dev))
        _tls.targets[dev] = t
    return t


def capture_pool(dev: Device) -> Any:
    """The allocation target of this thread's CUDA graph capture on ``dev``, or None."""
    cap = _tls.captures.get(dev)
    return None if cap is None else cap[0]


def begin_capture(dev: Device, s: Any, pool: Any) -> None:
    """Make ``s`` (already capturing) the current stream of ``dev`` and ``pool`` its allocation
    target on this thread, until end_capture (pygpukit.graphs.CUDAGraph.capture)."""
    _tls.captures[dev] = (pool, _tls.streams.get(dev), s)
    _tls.streams[dev] = s
    _tls.targets.clear()


def end_capture(dev: Device) -> None:
    _pool, prev, _s = _tls.captures.pop(dev)
    if prev is None:
        _tls.streams.pop(dev, None)
    else:
        _tls.streams[dev] = prev
    _tls.targets.clear()


def current_context(dev: Device | None = None) -> Context:
    """The innermost ``with ctx:`` on this thread for ``dev``, else the device's default context."""
    if dev is None:
        dev = default_device()
    for ctx in reversed(_tls.contexts):
        if ctx.device is dev:
            return ctx
    return _default_context(dev)


def _pool_for(dev: Device) -> Any:
    if _tls.contexts:
        return current_context(dev).pool
    ctx = _default_contexts.get(dev)
    return (ctx or _default_context(dev)).pool


def current_stream(dev: Any = None) -> Any:
    """The stream ops on ``dev`` run on, for this thread."""
    d = default_device() if dev is None else (dev if isinstance(dev, Device) else device(dev))
    t = _tls.targets.get(d)
    if t is not None:
        return t[1]
    s = _tls.streams.get(d)
    if s is not None:
        return s
    if _tls.contexts:
        return current_context(d).stream
    ctx = _default_contexts.get(d)
    return (ctx or _default_context(d)).stream


def _refuse_switch_while_capturing(dev: Device, s: Any) -> None:
    cap = _tls.captures.get(dev)
    if cap is not None and s != cap[2]:
        raise CaptureError(
            f"this thread is capturing a CUDA graph on {dev}: work sent to another stream would "
            "run now, outside the graph, on arrays the capture has not filled; switch streams "
            "after the capture"
        )


def set_stream(s: Any) -> None:
    """Make ``s`` the current stream of its device on this thread (None resets to the context's)."""
    if not isinstance(s, Stream):
        raise TypeError(f"set_stream expects a pygpukit Stream, got {type(s).__name__}")
    dev = _device_of_stream(s)
    _refuse_switch_while_capturing(dev, s)
    _tls.streams[dev] = s
    _tls.targets.clear()


def _device_of_stream(s: Any) -> Device:
    return CPU if s.device < 0 else Device("cuda", s.device)


@contextmanager
def stream(s: Any) -> Iterator[Any]:
    """``with gp.stream(s):`` runs the ops of s's device on ``s`` in this block, on this thread."""
    if not isinstance(s, Stream):
        raise TypeError(f"gp.stream expects a pygpukit Stream, got {type(s).__name__}")
    dev = _device_of_stream(s)
    _refuse_switch_while_capturing(dev, s)
    prev = _tls.streams.get(dev)
    _tls.streams[dev] = s
    _tls.targets.clear()
    try:
        yield s
    finally:
        if prev is None:
            _tls.streams.pop(dev, None)
        else:
            _tls.streams[dev] = prev
        _tls.targets.clear()


@contextmanager
def context(ctx: Context) -> Iterator[Context]:
    with ctx:
        yield ctx


def synchronize(dev: Any = None) -> None:
    """Wait for all work on the device (all streams)."""
    d = device(dev)
    if d.type == "cuda":
        _core.synchronize_device(d.index)


def memory_stats(dev: Any = None) -> dict[str, Any]:
    """Pool statistics of the current context on ``dev``."""
    stats: dict[str, Any] = _pool_for(device(dev)).stats()
    return stats


def empty_cache(dev: Any = None) -> None:
    """Return the cached (free) memory of the current context's pool to the driver."""
    _pool_for(device(dev)).trim(0)


def get_device_properties(dev: Any = None) -> dict[str, Any]:
    return device(dev).properties
