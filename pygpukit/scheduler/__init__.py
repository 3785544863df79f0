"""The GPU as a shared, schedulable resource: contexts with QoS tiers, memory reservations and
limits, SM partitions, pacing, and tasks admitted in order. A thin facade over the Rust
scheduler (``pygpukit._core.Scheduler``, one per device).

    from pygpukit.scheduler import initialize, create_context, context_session, GB
    initialize(device_id=0)
    chat = create_context("chat", max_vram=4 * GB, sm_share=0.5)          # Guaranteed
    batch = create_context("batch", qos="best_effort")                   # paced, shared SMs
    async with context_session(chat):
        ...                                   # arrays from chat's pool, ops on its stream

QoS, as Kubernetes defines it for pods (the class follows from the numbers when not given):
- ``guaranteed``: reservation == limit (``max_vram``). The memory is held from creation, the
  context is never paced, and its stream has the device's highest priority.
- ``burstable``: a ``reservation`` (held) plus headroom up to ``max_vram``, borrowed while free.
- ``best_effort``: no reservation; paced to ``pace`` (default 0.5) of the GPU's time while a
  Guaranteed context is active, lowest stream priority, its cache trimmed first under pressure.

Admission is deterministic: a context whose reservation does not fit the unreserved memory (or whose
SM share does not fit the free SMs) raises ``AdmissionError`` naming the request, what is free and
who holds it, and nothing is admitted. ``sm_share`` on a Guaranteed or Burstable context reserves
that fraction of the SMs for it alone; on a BestEffort context it caps the SMs it may use (CUDA
green contexts; multiples of 8 SMs on Hopper). Contexts without one run on every SM while no
reservation exists, else on the SMs no partition holds. Where green contexts are unavailable (driver
< 12.4, the CPU) the snapshot says so and contexts run on the whole device, protected by stream
priorities and pacing.

Without a GPU, ``initialize(device_id=0)`` starts the CPU simulation over host memory: admission,
tasks, quotas and pacing behave the same; SM shares are planned only.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pygpukit import _core, runtime
from pygpukit.errors import AdmissionError, QuotaExceededError
from pygpukit.scheduler._args import number, optional_int
from pygpukit.scheduler.compat import (
    MemoryPool,
    Partition,
    PartitionConfig,
    PartitionError,
    PartitionLimits,
    PartitionManager,
    QosClass,
    QosEvaluation,
    QosPolicyEvaluator,
    QosTaskMeta,
)
from pygpukit.scheduler.context import Completion, ScheduledContext, context_session
from pygpukit.scheduler.tasks import TaskHandle, _Waiters, run

__all__ = [
    "GB",
    "KB",
    "MB",
    "AdmissionError",
    "Completion",
    "MemoryPool",
    "Partition",
    "PartitionConfig",
    "PartitionError",
    "PartitionLimits",
    "PartitionManager",
    "QosClass",
    "QosEvaluation",
    "QosPolicyEvaluator",
    "QosTaskMeta",
    "QuotaExceededError",
    "ScheduledContext",
    "Scheduler",
    "TaskHandle",
    "context_session",
    "create_context",
    "get_scheduler",
    "initialize",
    "run",
    "shutdown",
    "snapshot",
]

# Binary units, as 0.2.x defined them.
KB = 1 << 10
MB = 1 << 20
GB = 1 << 30

_DEFAULT: Any = object()  # "the class's default" for pace


def _host_memory() -> int:
    return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))


class Scheduler:
    """One device's scheduler (``initialize`` returns it). ``simulated`` is True for the CPU
    simulation, which stands in for ``device_id`` on a machine without a GPU."""

    def __init__(self, device: runtime.Device, core: Any, simulated_id: int | None) -> None:
        self.device = device
        self.core = core
        self.simulated = simulated_id is not None
        self.simulated_id = simulated_id
        self.waiters = _Waiters()
        self._contexts: dict[str, ScheduledContext] = {}
        self._lock = threading.Lock()

    def create_context(
        self,
        name: str,
        max_vram: int | None = None,
        *,
        qos: str | None = None,
        reservation: int | None = None,
        sm_share: float | None = None,
        priority: int = 0,
        pace: Any = _DEFAULT,
    ) -> ScheduledContext:
        """Admit a context (see the module docstring), or raise AdmissionError."""
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int, got {priority!r}")
        default = pace is _DEFAULT
        core = self.core.create_context(
            name,
            qos=qos,
            reservation=optional_int("reservation", reservation),
            limit=optional_int("max_vram", max_vram),
            sm_share=None if sm_share is None else number("sm_share", sm_share),
            priority=priority,
            pace=None if default or pace is None else number("pace", pace),
            default_pace=default,
        )
        ctx = ScheduledContext(self, core)
        with self._lock:
            self._contexts[name] = ctx
        return ctx

    def context(self, name: str) -> ScheduledContext:
        with self._lock:
            ctx = self._contexts.get(name)
        if ctx is None:
            raise KeyError(f"no context named {name!r} on {self}")
        return ctx

    def contexts(self) -> list[ScheduledContext]:
        with self._lock:
            return list(self._contexts.values())

    def _close(self, ctx: ScheduledContext) -> None:
        admitted = self.core.remove_context(ctx.name)
        with self._lock:
            self._contexts.pop(ctx.name, None)
        self._wake(admitted)

    def _wake(self, admitted: list[int]) -> None:
        def state_of(i: int) -> str | None:
            t = self.core.task(i)
            return None if t is None else str(t["state"])

        self.waiters.wake(admitted, state_of)

    @property
    def active_window_ms(self) -> float:
        """How long a Guaranteed context counts as active after its last launch (pacing)."""
        return float(self.core.active_window_ms)

    @active_window_ms.setter
    def active_window_ms(self, v: float) -> None:
        self.core.active_window_ms = v

    def snapshot(self) -> dict[str, Any]:
        """Devices, contexts (tier, reservation, limit, SMs, memory, pacing, task counts),
        tasks and recent admission decisions, as plain data."""
        snap: dict[str, Any] = self.core.snapshot()
        snap["device_name"] = str(self.device)
        snap["simulated_device"] = self.simulated_id
        return snap

    def shutdown(self) -> None:
        """Close every context and forget this scheduler (the next initialize makes a new one)."""
        for ctx in self.contexts():
            ctx.close()
        _core.Scheduler.shutdown(self.device.core_index)
        with _registry_lock:
            _schedulers.pop(self.device, None)

    def __repr__(self) -> str:
        sim = f", simulating device {self.simulated_id}" if self.simulated else ""
        return f"Scheduler(device='{self.device}'{sim})"


_schedulers: dict[runtime.Device, Scheduler] = {}
_registry_lock = threading.Lock()


def initialize(
    device_id: Any = 0,
    *,
    capacity: int | None = None,
    sm_count: int | None = None,
) -> Scheduler:
    """The scheduler of ``device_id`` (made on first call, the same object after).

    ``capacity``: bytes admission may reserve (default: the device's free memory now; in the
    CPU simulation the host's memory). ``sm_count``: SMs the CPU simulation plans shares
    against (ignored on a GPU). Without a GPU, an integer ``device_id`` (or "cpu") gives the
    CPU simulation."""
    optional_int("capacity", capacity)
    optional_int("sm_count", sm_count)
    if isinstance(device_id, bool):
        raise TypeError(f"device_id must be an int, 'cpu', 'cuda:N' or a Device, got {device_id!r}")
    simulated: int | None = None
    if isinstance(device_id, int) and not runtime.is_cuda_available():
        if device_id < 0:
            raise ValueError(f"device_id must be >= 0, got {device_id}")
        dev, simulated = runtime.CPU, device_id
    else:
        dev = runtime.device(device_id)
        if dev.type == "cpu":
            simulated = 0
    with _registry_lock:
        sched = _schedulers.get(dev)
        if sched is not None:
            if sched.simulated and simulated not in (None, sched.simulated_id):
                raise ValueError(
                    f"{sched} exists; the CPU simulation stands in for one device at a time "
                    f"(shut it down before simulating device {simulated})"
                )
            snap = sched.core.snapshot()
            if sm_count is not None and sched.simulated and snap["sm_total"] != sm_count:
                raise ValueError(
                    f"{sched} exists with {snap['sm_total']} simulated SMs; shut it down before "
                    f"initializing it with sm_count={sm_count}"
                )
            if capacity is not None and snap["capacity"] != capacity:
                raise ValueError(
                    f"{sched} exists with another capacity; shut it down before initializing "
                    f"it with capacity={capacity}"
                )
            return sched
        if dev.type == "cpu" and capacity is None:
            capacity = _host_memory()
        core = _core.Scheduler.for_device(dev.core_index, capacity, sm_count)
        sched = Scheduler(dev, core, simulated)
        _schedulers[dev] = sched
        return sched


def get_scheduler(device: Any = None) -> Scheduler:
    """The initialized scheduler of ``device`` (default: the default device's); initializes it
    with the defaults if needed."""
    if device is None:
        dev = runtime.default_device()
    elif type(device) is int and not runtime.is_cuda_available():
        dev = runtime.CPU
    else:
        dev = runtime.device(device)
    sched = _schedulers.get(dev)
    if sched is not None:
        return sched
    return initialize(dev if dev.type == "cuda" else "cpu")


def create_context(
    name: str,
    max_vram: int | None = None,
    *,
    qos: str | None = None,
    reservation: int | None = None,
    sm_share: float | None = None,
    priority: int = 0,
    pace: Any = _DEFAULT,
    device: Any = None,
) -> ScheduledContext:
    """Admit a context on ``device``'s scheduler (see ``Scheduler.create_context``)."""
    return get_scheduler(device).create_context(
        name,
        max_vram,
        qos=qos,
        reservation=reservation,
        sm_share=sm_share,
        priority=priority,
        pace=pace,
    )


def snapshot(device: Any = None) -> dict[str, Any]:
    """``get_scheduler(device).snapshot()``."""
    return get_scheduler(device).snapshot()


def shutdown(device: Any = None) -> None:
    """Close every context of ``device``'s scheduler and forget it (all devices if None)."""
    if device is None:
        for s in list(_schedulers.values()):
            s.shutdown()
        return
    get_scheduler(device).shutdown()
