"""Devices, streams, events, execution contexts and memory: a thin facade over the Rust core.

Every op runs on the *current stream* of its device. Unless the user says otherwise that is a
pygpukit-created non-blocking stream per device (never the legacy default stream by accident).
``with gp.stream(s):`` switches it for the current thread or asyncio task: the current
contexts and streams live in a ``contextvars.ContextVar``, so every thread and every asyncio
task has its own, and coroutines interleaved on one event loop never see each other's.

An *execution context* (``gp.Context``) is a named VRAM budget: its own memory pool (with a quota)
and its own stream. All contexts share the device's primary CUDA context, so pointers pass freely
between them and to torch / Triton / CuPy. The ``default`` context has no quota.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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
    "sm_count",
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
    contexts = _state.get().contexts
    if contexts:  # inside `with ctx:` factories default to the context's device
        return contexts[-1].device
    if _default is None:
        env = os.environ.get("PYGPUKIT_DEVICE")
        _default = device(env) if env else (Device("cuda", 0) if is_cuda_available() else CPU)
    return _default


def set_default_device(spec: Any) -> None:
    global _default
    _default = device(spec)


class Context:
    """A named execution context on one device: a memory pool with an optional quota and a stream.

    ``with ctx:`` (or ``with gp.context(ctx):``) makes it current in this thread or asyncio task
    (the state lives in a ``contextvars.ContextVar``): arrays made inside draw from its pool, and
    its stream becomes the current stream. Contexts made by ``pygpukit.scheduler`` add a QoS
    class, an admission decision, an SM partition and a pacer (``ScheduledContext``); this plain
    one has none of those and runs wherever its stream runs.
    """

    #: The scheduler's launch gate of this context (None: launches are not gated).
    pacer: Any = None

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
        if max_vram is not None and (
            not isinstance(max_vram, int) or isinstance(max_vram, bool) or max_vram < 0
        ):
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
        st = _state.get()
        _state.set(st.replace(contexts=(*st.contexts, self)))
        return self

    def __exit__(self, *exc: object) -> None:
        st = _state.get()
        stack = list(st.contexts)
        if stack and stack[-1] is self:
            stack.pop()
        else:  # exits out of order: remove this context wherever it is (innermost first)
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is self:
                    del stack[i]
                    break
            else:
                raise ValueError(f"{self!r} is not current in this thread or task")
        _state.set(st.replace(contexts=tuple(stack)))

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


class _State:
    """The current contexts, streams and captures of one thread or asyncio task.

    Immutable once set: every change makes a new state (``replace``) and sets it in the
    ContextVar, so a task or thread that copied the context keeps its own. ``targets`` is the
    one mutable part, a cache of what ``alloc_target`` derived from this state.
    """

    __slots__ = ("captures", "contexts", "streams", "targets")

    def __init__(
        self,
        streams: dict[Device, Any] | None = None,
        contexts: tuple[Context, ...] = (),
        captures: dict[Device, tuple[Any, Any, Any]] | None = None,
    ) -> None:
        self.streams: dict[Device, Any] = streams if streams is not None else {}
        self.contexts = contexts
        # Per device while a CUDA graph is captured (pygpukit.graphs): (allocation target, the
        # stream entry the capture replaced, the capturing stream).
        self.captures: dict[Device, tuple[Any, Any, Any]] = captures if captures is not None else {}
        # (pool, stream, pacer) per device: the allocation and launch hot paths read this one
        # dict; a new state starts with an empty one.
        self.targets: dict[Device, tuple[Any, Any, Any]] = {}

    def replace(
        self,
        streams: dict[Device, Any] | None = None,
        contexts: tuple[Context, ...] | None = None,
        captures: dict[Device, tuple[Any, Any, Any]] | None = None,
    ) -> _State:
        return _State(
            self.streams if streams is None else streams,
            self.contexts if contexts is None else contexts,
            self.captures if captures is None else captures,
        )


# Threads start with the empty state (as they started with empty thread-locals); asyncio tasks
# and asyncio.to_thread copy their creator's. The default's targets cache is shared by every
# thread that set nothing, which is right: for all of them it holds the default contexts.
_state: ContextVar[_State] = ContextVar("pygpukit_state", default=_State())  # noqa: B039


def alloc_target(dev: Device) -> tuple[Any, Any, Any]:
    """(pool, stream, pacer) that allocations and launches on ``dev`` use here; the pacer is the
    current scheduler context's launch gate, None for plain contexts and during a capture."""
    st = _state.get()
    t = st.targets.get(dev)
    if t is None:
        cap = st.captures.get(dev)
        if cap is None:
            ctx = current_context(dev)
            t = (ctx.pool, current_stream(dev), ctx.pacer)
        else:
            # Capturing: the pool is graphs._CapturePool (memory must exist outside the graph;
            # it allocates on its side stream), the stream the capturing one, and nothing is
            # gated (replays are).
            t = (cap[0], current_stream(dev), None)
        st.targets[dev] = t
    return t


#: True once a context with a launch gate exists (pygpukit.scheduler): until then the launch
#: paths skip the gate lookup altogether.
gates_in_use = False


def launch_gate(dev: Device) -> Any:
    """The launch gate (pacer) launches on ``dev`` pass here, or None (the common case)."""
    return alloc_target(dev)[2] if gates_in_use else None


def gated(pacer: Any, stream: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` (one launch, or an op that launches) inside ``pacer``'s gate on ``stream``."""
    pacer.enter(stream)
    try:
        return fn(*args, **kwargs)
    finally:
        pacer.exit(stream)


def capture_pool(dev: Device) -> Any:
    """The allocation target of this thread's CUDA graph capture on ``dev``, or None."""
    cap = _state.get().captures.get(dev)
    return None if cap is None else cap[0]


def begin_capture(dev: Device, s: Any, pool: Any) -> None:
    """Make ``s`` (already capturing) the current stream of ``dev`` and ``pool`` its allocation
    target here, until end_capture (pygpukit.graphs.CUDAGraph.capture)."""
    st = _state.get()
    captures = {**st.captures, dev: (pool, st.streams.get(dev), s)}
    _state.set(st.replace(streams={**st.streams, dev: s}, captures=captures))


def end_capture(dev: Device) -> None:
    st = _state.get()
    captures = dict(st.captures)
    _pool, prev, _s = captures.pop(dev)
    streams = dict(st.streams)
    if prev is None:
        streams.pop(dev, None)
    else:
        streams[dev] = prev
    _state.set(st.replace(streams=streams, captures=captures))


def current_context(dev: Device | None = None) -> Context:
    """The innermost ``with ctx:`` here for ``dev``, else the device's default context."""
    if dev is None:
        dev = default_device()
    for ctx in reversed(_state.get().contexts):
        if ctx.device is dev:
            return ctx
    return _default_context(dev)


def current_stream(dev: Any = None) -> Any:
    """The stream ops on ``dev`` run on, in this thread or asyncio task."""
    d = default_device() if dev is None else (dev if isinstance(dev, Device) else device(dev))
    st = _state.get()
    t = st.targets.get(d)
    if t is not None:
        return t[1]
    s = st.streams.get(d)
    if s is not None:
        return s
    return current_context(d).stream


def _refuse_switch_while_capturing(dev: Device, s: Any) -> None:
    cap = _state.get().captures.get(dev)
    if cap is not None and s != cap[2]:
        raise CaptureError(
            f"this thread is capturing a CUDA graph on {dev}: work sent to another stream would "
            "run now, outside the graph, on arrays the capture has not filled; switch streams "
            "after the capture"
        )


def _set_stream(dev: Device, s: Any) -> None:
    st = _state.get()
    streams = dict(st.streams)
    if s is None:
        streams.pop(dev, None)
    else:
        streams[dev] = s
    _state.set(st.replace(streams=streams))


def set_stream(s: Any) -> None:
    """Make ``s`` the current stream of its device here (this thread or asyncio task)."""
    if not isinstance(s, Stream):
        raise TypeError(f"set_stream expects a pygpukit Stream, got {type(s).__name__}")
    dev = _device_of_stream(s)
    _refuse_switch_while_capturing(dev, s)
    _set_stream(dev, s)


def _device_of_stream(s: Any) -> Device:
    return CPU if s.device < 0 else Device("cuda", s.device)


@contextmanager
def stream(s: Any) -> Iterator[Any]:
    """``with gp.stream(s):`` runs the ops of s's device on ``s`` in this block (this thread or
    asyncio task)."""
    if not isinstance(s, Stream):
        raise TypeError(f"gp.stream expects a pygpukit Stream, got {type(s).__name__}")
    dev = _device_of_stream(s)
    _refuse_switch_while_capturing(dev, s)
    prev = _state.get().streams.get(dev)
    _set_stream(dev, s)
    try:
        yield s
    finally:
        _set_stream(dev, prev)


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
    stats: dict[str, Any] = current_context(device(dev)).pool.stats()
    return stats


def empty_cache(dev: Any = None) -> None:
    """Return the cached (free) memory of the current context's pool to the driver (a
    scheduler context keeps the memory held for its reservation)."""
    current_context(device(dev)).pool.trim(0)


_device_sms: dict[Device, int] = {}


def sm_count(dev: Device) -> int:
    """Multiprocessors that work launched on ``dev``'s current stream may use: the SMs of its
    partition (a scheduler context's green context), else all of the device's. Kernels size
    split-K and persistent grids with it so they fill what they can run on. The CPU device (the
    Triton interpreter, the reference backend) gets 2, so tests exercise the split paths."""
    if dev.type != "cuda":
        return 2
    n: int | None = current_stream(dev).sm_count
    if n:
        return n
    n = _device_sms.get(dev)
    if n is None:
        n = _device_sms[dev] = int(dev.properties.get("sm_count", 4))
    return n


def get_device_properties(dev: Any = None) -> dict[str, Any]:
    return device(dev).properties
