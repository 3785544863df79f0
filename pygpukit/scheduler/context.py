"""Scheduler contexts, sessions, and awaitable completion of GPU work.

A ``ScheduledContext`` is a ``gp.Context`` that a device's scheduler admitted: its pool has the
context's limit as quota and holds its reservation, its stream runs on its SM partition (where
green contexts exist) at its tier's stream priority, and its ``pacer`` gates every launch made
while it is current (``pygpukit.ops`` dispatch, CUDA graph replay, ``gp.jit`` kernels).

``context_session(ctx)`` makes a context current in a ``with`` or an ``async with`` block. The
current context lives in a ContextVar, so each thread and each asyncio task has its own.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from pygpukit import runtime

if TYPE_CHECKING:
    from pygpukit.scheduler import Scheduler
    from pygpukit.scheduler.tasks import TaskHandle

__all__ = ["Completion", "ScheduledContext", "context_session"]


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Completion:
    """The work queued on a stream up to now, as an event: ``await`` it (polls the event without
    blocking the event loop), ``wait()`` for it (blocks this thread, GIL released), or ask
    ``done()``. Made by ``ScheduledContext.synchronize``."""

    __slots__ = ("_awaited", "event", "stream")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.event = runtime.Event(device=stream.device, enable_timing=False)
        self.event.record(stream)
        self._awaited = False

    def done(self) -> bool:
        return bool(self.event.query())

    def wait(self) -> None:
        self._awaited = True
        self.event.synchronize()

    def __await__(self) -> Generator[Any, None, None]:
        self._awaited = True
        return self._poll().__await__()

    async def _poll(self) -> None:
        # Event queries are cheap (no sync); back off from 20 us to 1 ms between them.
        delay = 20e-6
        while not self.event.query():
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1e-3)

    def __del__(self) -> None:
        if not self._awaited and not self.done():
            warnings.warn(
                "a Completion of GPU work was neither awaited nor waited for",
                RuntimeWarning,
                stacklevel=2,
            )


class ScheduledContext(runtime.Context):
    """A context admitted by a device's scheduler (``pygpukit.scheduler.create_context``).

    Beyond ``gp.Context``: ``qos`` ("guaranteed", "burstable", "best_effort"), ``reservation`` and
    ``max_vram`` (the limit) in bytes, ``sm_share`` (asked) and ``sm_count`` (the SMs its green
    context runs on; None: every SM), ``placement`` ("exclusive": reserved SMs, "capped": a
    BestEffort cap, "shared": the SMs no partition holds, "device": every SM), ``priority``
    (admission order within the tier), ``pace`` (its share of GPU time while a Guaranteed context is
    active; None: not paced), ``pacer`` (its launch gate), and the scheduler that admitted it.
    ``close()`` gives its reservation and SMs back.
    """

    def __init__(self, scheduler: Scheduler, core: Any) -> None:
        self.scheduler = scheduler
        self._core = core
        self.name = core.name
        self.device = scheduler.device
        self.pool = core.pool
        self.stream = core.stream
        self.pacer = core.pacer
        self.closed = False
        runtime.gates_in_use = True

    qos = property(lambda self: self._core.qos, doc="'guaranteed', 'burstable' or 'best_effort'")
    reservation = property(lambda self: self._core.reservation, doc="bytes held for it")
    sm_share = property(lambda self: self._core.sm_share, doc="the SM share it asked for")
    sm_count = property(lambda self: self._core.sm_count, doc="SMs of its green context")
    planned_sms = property(lambda self: self._core.planned_sms, doc="SMs the ledger gave it")
    placement = property(
        lambda self: self._core.placement, doc="exclusive, capped, shared or device"
    )
    priority = property(lambda self: self._core.priority, doc="admission order in its tier")
    pace = property(lambda self: self._core.pace, doc="share of GPU time when paced")

    def synchronize(self) -> Completion:
        """The work queued on this context's stream so far. In a coroutine, ``await`` the
        result; elsewhere this call waits for it before returning."""
        c = Completion(self.stream)
        if not _in_event_loop():
            c.wait()
        return c

    def task(self, name: str = "", memory: int = 0, priority: int | None = None) -> TaskHandle:
        """A task of this context claiming ``memory`` bytes (see pygpukit.scheduler.tasks)."""
        from pygpukit.scheduler.tasks import TaskHandle

        return TaskHandle(self, name, memory, priority)

    def pacing_stats(self) -> dict[str, Any]:
        """Launches, paced launches, waits, waited and busy milliseconds, throttling state."""
        stats: dict[str, Any] = self.pacer.stats()
        return stats

    def close(self) -> None:
        """Give the reservation, SMs and pending tasks back (running tasks must end first).
        Arrays made in it stay valid; it admits nothing more. Idempotent."""
        if not self.closed:
            self.scheduler._close(self)
            self.closed = True

    def __enter__(self) -> ScheduledContext:
        if self.closed:
            raise RuntimeError(f"context '{self.name}' was closed")
        super().__enter__()
        return self

    def __repr__(self) -> str:
        sms = "all SMs" if self.sm_count is None else f"{self.sm_count} SMs"
        return (
            f"ScheduledContext({self.name!r}, {self.qos}, reservation={self.reservation}, "
            f"max_vram={self.max_vram}, {sms}, device='{self.device}')"
        )


class context_session:
    """``with context_session(ctx):`` / ``async with context_session(ctx):`` make ``ctx``
    current in this thread or asyncio task: arrays come from its pool (within its budget), ops
    run on its stream and pass its launch gate. Sessions nest; each asyncio task has its own."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: runtime.Context) -> None:
        if not isinstance(ctx, runtime.Context):
            raise TypeError(f"context_session expects a context, got {type(ctx).__name__}")
        self.ctx = ctx

    def __enter__(self) -> runtime.Context:
        return self.ctx.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.ctx.__exit__(*exc)

    async def __aenter__(self) -> runtime.Context:
        return self.ctx.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.ctx.__exit__(*exc)
