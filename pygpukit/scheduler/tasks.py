"""Tasks: work submitted to a scheduler context, admitted in order as its memory claim fits.

    async with ctx.task("prefill", memory=2 * GB):   # waits (without blocking the loop)
        ...                                          # until admitted; ctx is current here
    result = await scheduler.run(ctx, fn, *args, memory=..., priority=...)
    with ctx.task("etl", memory=GB):                  # the same, blocking this thread

A task is pending until the scheduler admits it (tier first, then priority, then arrival; its claim
must fit its context's limit and, above its context's reservation, the unreserved memory no other
task borrows), then running while the block runs, then completed, failed (the block raised) or
cancelled (the awaiting coroutine was cancelled, or the context closed). A task that can never fit
raises AdmissionError at once; one that waits until a new reservation makes it impossible fails then
(entering it raises RuntimeError with the reason). The block's end waits for the GPU work queued on
the context's stream (awaited through an event in ``async with``), so a completed task's work is
done.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pygpukit.scheduler._args import nonneg_int
from pygpukit.scheduler.context import Completion

if TYPE_CHECKING:
    from pygpukit.scheduler.context import ScheduledContext

__all__ = ["TaskHandle", "run"]


class _Waiters:
    """Who waits for which task's admission: a callback per task id, run (once) when the
    scheduler admits or ends that task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, Callable[[], None]] = {}

    def add(self, task_id: int, wake: Callable[[], None]) -> None:
        with self._lock:
            self._by_id[task_id] = wake

    def discard(self, task_id: int) -> None:
        with self._lock:
            self._by_id.pop(task_id, None)

    def wake(self, ids: list[int], state_of: Callable[[int], str | None]) -> None:
        """Wake the admitted ``ids`` and any waiter whose task is no longer pending."""
        with self._lock:
            rest = [i for i in self._by_id if i not in ids and state_of(i) != "pending"]
            woken = [i for i in ids if i in self._by_id] + rest  # admission order first
            calls = [self._by_id.pop(i) for i in woken]
        errors = []
        for c in calls:
            try:
                c()
            except Exception as e:  # one waiter's closed loop must not strand the others
                errors.append(e)
        if errors:
            raise errors[0]


class TaskHandle:
    """One task of a context; enter it with ``with`` or ``async with`` (once)."""

    def __init__(self, ctx: ScheduledContext, name: str, memory: int, priority: int | None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"task name must be a string, got {type(name).__name__}")
        nonneg_int("task memory", memory)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise TypeError(f"task priority must be an int or None, got {priority!r}")
        self.ctx = ctx
        self.name = name
        self.memory = memory
        self.priority = priority
        self.id: int | None = None

    @property
    def state(self) -> str | None:
        """pending, admitted, running, completed, failed, cancelled (None before submission)."""
        info = self.info()
        return None if info is None else str(info["state"])

    def info(self) -> dict[str, Any] | None:
        """The scheduler's record: state, timestamps (ms), claim, reason."""
        if self.id is None:
            return None
        info: dict[str, Any] | None = self.ctx.scheduler.core.task(self.id)
        return info

    def _submit(self) -> str:
        if self.id is not None:
            raise RuntimeError(f"task {self.id} ('{self.name}') was already entered")
        if self.ctx.closed:
            raise RuntimeError(f"context '{self.ctx.name}' was closed")
        core = self.ctx.scheduler.core
        self.id, state = core.submit(self.ctx.name, self.name, self.memory, self.priority)
        return str(state)

    def _started(self) -> None:
        assert self.id is not None
        info = self.info() or {}
        state = info.get("state")
        if state != "admitted":
            why = f": {info['reason']}" if info.get("reason") else ""
            raise RuntimeError(
                f"task {self.id} ('{self.name}') was {state} before it could run{why}"
            )
        self.ctx.scheduler.core.start(self.id)

    def _end(self, exc: BaseException | None) -> None:
        assert self.id is not None
        sched = self.ctx.scheduler
        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
            admitted = sched.core.cancel(self.id)
        else:
            admitted = sched.core.finish(self.id, None if exc is None else repr(exc))
        sched._wake(admitted)

    def _abandon(self) -> None:
        """Cancel a task that never ran (its wait was interrupted)."""
        assert self.id is not None
        sched = self.ctx.scheduler
        sched.waiters.discard(self.id)
        if self.state in ("pending", "admitted"):
            sched._wake(sched.core.cancel(self.id))

    # -- blocking use -----------------------------------------------------------------------

    def __enter__(self) -> TaskHandle:
        if self._submit() == "pending":
            ready = threading.Event()
            assert self.id is not None
            self.ctx.scheduler.waiters.add(self.id, ready.set)
            try:
                # Re-check after registering: an admission between submit and add is not lost.
                if self.state == "pending":
                    ready.wait()
            except BaseException:
                self._abandon()
                raise
            self.ctx.scheduler.waiters.discard(self.id)
        self._started()
        self.ctx.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self.ctx.__exit__()
            if exc is None:
                Completion(self.ctx.stream).wait()
        except BaseException as e:  # the wait failed: the task did not complete
            self._end(e)
            raise
        self._end(exc)

    # -- asyncio use ------------------------------------------------------------------------

    async def __aenter__(self) -> TaskHandle:
        if self._submit() == "pending":
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()

            def resolve() -> None:
                if not fut.done():
                    fut.set_result(None)

            def wake() -> None:
                loop.call_soon_threadsafe(resolve)

            assert self.id is not None
            self.ctx.scheduler.waiters.add(self.id, wake)
            try:
                if self.state == "pending":
                    await fut
            except BaseException:
                self._abandon()
                raise
            self.ctx.scheduler.waiters.discard(self.id)
        self._started()
        self.ctx.__enter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self.ctx.__exit__()
            if exc is None:
                await Completion(self.ctx.stream)
        except BaseException as e:
            self._end(e)
            raise
        self._end(exc)

    def __repr__(self) -> str:
        return f"TaskHandle({self.name!r} of {self.ctx.name!r}, id={self.id}, {self.state})"


async def run(
    ctx: ScheduledContext,
    fn: Callable[..., Any],
    *args: Any,
    name: str = "",
    memory: int = 0,
    priority: int | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` as a task of ``ctx``: wait for admission, run it with ``ctx``
    current (a coroutine function on this event loop, any other callable in a worker thread so
    the loop stays free), then await its GPU work through an event. Returns fn's result."""
    label = name or getattr(fn, "__name__", "task")
    async with TaskHandle(ctx, label, memory, priority):
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        # to_thread copies this task's contextvars: the worker thread sees ctx current.
        return await asyncio.to_thread(fn, *args, **kwargs)
