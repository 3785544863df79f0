"""pygpukit.scheduler on the CPU simulation: sessions in threads and asyncio tasks, tasks and
their queue, pacing of a BestEffort context while a Guaranteed one is active, quotas per
context, the 0.2.x objects as docs/api-0.2.md writes them, and ``python -m pygpukit sched``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import scheduler as sched
from pygpukit.scheduler import (
    GB,
    MB,
    MemoryPool,
    PartitionConfig,
    PartitionLimits,
    PartitionManager,
    QosPolicyEvaluator,
    QosTaskMeta,
    context_session,
    create_context,
    initialize,
)

CPU = gp.device("cpu")


@pytest.fixture
def s() -> Iterator[sched.Scheduler]:
    """A fresh CPU-simulation scheduler of 8 GiB with 100 simulated SMs."""
    sched.shutdown()
    got = initialize("cpu", capacity=8 * GB, sm_count=100)
    yield got
    got.shutdown()


def test_api_md_calls_run_as_written(s: sched.Scheduler) -> None:
    # docs/api-0.2.md, "Scheduler", on a machine without a GPU (the CPU simulation).
    assert initialize("cpu") is s
    ctx = create_context("llm", max_vram=4 * GB, device="cpu")
    assert (ctx.qos, ctx.reservation, ctx.max_vram) == ("guaranteed", 4 * GB, 4 * GB)

    async def main() -> float:
        async with context_session(ctx):
            x = gp.ones((4, 8))
            y = gp.exp(x)
            await ctx.synchronize()
            return float(y.to_numpy()[0, 0])

    assert asyncio.run(main()) == pytest.approx(np.e, rel=1e-6)
    pool = MemoryPool(quota=100 * MB, enable_eviction=True)
    block = pool.allocate(4096)
    assert block.nbytes == 4096 and pool.stats()["current_bytes"] == 4096
    ev = QosPolicyEvaluator(total_memory=8 * GB, total_bandwidth=1.0)
    r = ev.evaluate(QosTaskMeta.guaranteed("task-1", "Critical Task", 256 * MB))
    assert r.admitted and r.is_admitted() and r.priority == 100
    ev.reserve(r)
    b = ev.evaluate(QosTaskMeta.burstable("task-2", "Burst", 128 * MB, 2.0))
    assert b.is_admitted() and b.allowed_memory == 256 * MB
    assert ev.evaluate(QosTaskMeta.best_effort("task-3", "Background")).is_admitted()
    big = ev.evaluate(QosTaskMeta.guaranteed("task-4", "Huge", 9 * GB))
    assert big.is_rejected() and not big.admitted and "9663676416" in big.reason
    assert ev.stats()["guaranteed_memory"] == 256 * MB
    manager = PartitionManager(PartitionConfig(total_memory=8 * GB))
    p = manager.create_partition(
        "inference", "Inference", PartitionLimits().memory(4 * GB).compute(0.5)
    )
    assert (p.memory, p.compute) == (4 * GB, 0.5) and p.planned_sms
    with pytest.raises(sched.PartitionError):
        manager.create_partition("more", "More", PartitionLimits().memory(5 * GB))
    import _pygpukit_rust as rust

    assert rust.MemoryPool is MemoryPool and rust.QosTaskMeta is QosTaskMeta


def test_asyncio_sessions_stay_apart(s: sched.Scheduler) -> None:
    a = s.create_context("a", max_vram=64 * MB)
    b = s.create_context("b", qos="best_effort")
    seen: list[tuple[str, str, bool, str]] = []

    async def worker(ctx: sched.ScheduledContext) -> None:
        async with context_session(ctx):
            for _ in range(5):
                arr = gp.empty((1024,), gp.float32)
                seen.append(
                    (
                        ctx.name,
                        arr._buf.pool_name,
                        gp.current_stream() == ctx.stream,
                        gp.runtime.current_context().name,
                    )
                )
                await asyncio.sleep(0)  # interleave with the other coroutine

    async def main() -> None:
        await asyncio.gather(worker(a), worker(b))

    asyncio.run(main())
    assert len(seen) == 10 and {x[0] for x in seen[:2]} == {"a", "b"}, "interleaved"
    for name, pool, own_stream, current in seen:
        assert pool == name and own_stream and current == name
    assert a.memory_stats()["num_allocs"] == 5 and b.memory_stats()["num_allocs"] == 5
    assert gp.runtime.current_context(CPU).name == "default"


def test_threads_start_outside_the_callers_session(s: sched.Scheduler) -> None:
    a = s.create_context("a", max_vram=64 * MB)
    got: list[str] = []
    with context_session(a):
        t = threading.Thread(target=lambda: got.append(gp.runtime.current_context(CPU).name))
        t.start()
        t.join()

        async def via_to_thread() -> str:
            return await asyncio.to_thread(lambda: gp.runtime.current_context(CPU).name)

        got.append(asyncio.run(via_to_thread()))
    assert got == ["default", "a"], "threads start empty; asyncio.to_thread copies the session"


def test_best_effort_quota_leaves_guaranteed_alone(s: sched.Scheduler) -> None:
    g = s.create_context("g", max_vram=4 * MB)
    b = s.create_context("b", 1 * MB, qos="best_effort")
    with context_session(b):
        keep = gp.empty((128 * 1024,), gp.float32)  # 512 KiB
        with pytest.raises(gp.QuotaExceededError) as e:
            gp.empty((256 * 1024,), gp.float32)
        assert e.value.context == "b"
    with context_session(g):
        ok = gp.empty((1024 * 1024,), gp.float32)  # all of g's 4 MiB
    assert g.memory_stats()["quota_rejections"] == 0 and b.memory_stats()["quota_rejections"] == 1
    assert keep.nbytes + ok.nbytes == 512 * 1024 + 4 * MB


def test_best_effort_is_paced_while_guaranteed_is_active(s: sched.Scheduler) -> None:
    g = s.create_context("g", max_vram=16 * MB)
    b = s.create_context("b", qos="best_effort", pace=0.25)
    # The waits below depend on how fast this host multiplies: keep g active throughout.
    s.active_window_ms = 60_000
    with context_session(b):
        x = gp.from_numpy(np.random.default_rng(0).standard_normal((320, 320), np.float32))
        for _ in range(5):
            gp.matmul(x, x)
    assert b.pacing_stats()["paced_launches"] == 0, "nothing Guaranteed was active"
    t0 = time.perf_counter()
    with context_session(b):
        for _ in range(30):
            with context_session(g):
                gp.add(x, x)  # keeps g active
            for _ in range(3):
                gp.matmul(x, x)  # host work on the NumPy backend, timed by host events
    wall = time.perf_counter() - t0
    st = b.pacing_stats()
    assert st["paced_launches"] >= 90 and st["waits"] > 0 and st["throttling"]
    assert st["busy_ms"] / 1e3 / wall < 0.25 + 0.1, st
    assert s.snapshot()["guaranteed_idle_ms"] < 5_000, "g's launches marked the device active"


def test_tasks_queue_and_run_their_lifecycle(s: sched.Scheduler) -> None:
    s.create_context("g", max_vram=1 * GB)
    batch = s.create_context("batch", qos="best_effort")
    order: list[str] = []

    async def job(name: str, hold: asyncio.Event | None = None) -> str:
        order.append(f"start {name}")
        if hold is not None:
            await hold.wait()
        gp.ones((16,))
        order.append(f"end {name}")
        return name

    async def main() -> None:
        hold = asyncio.Event()

        # 8 GiB unreserved: one 5 GiB claim at a time, so the others wait in the queue.
        def task(name: str, memory: int, *extra: Any, priority: int | None = None) -> Any:
            run = sched.run(batch, job, name, *extra, name=name, memory=memory, priority=priority)
            return asyncio.create_task(run)

        first = task("a", 5 * GB, hold)
        await asyncio.sleep(0.01)
        low = task("low", 5 * GB, priority=0)
        high = task("high", 5 * GB, priority=5)
        doomed = task("doomed", 5 * GB)
        await asyncio.sleep(0.01)
        states = {t["name"]: t["state"] for t in s.snapshot()["tasks"]}
        assert states == {"a": "running", "low": "pending", "high": "pending", "doomed": "pending"}
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        hold.set()
        assert await first == "a"
        assert await high == "high" and await low == "low"
        with pytest.raises(sched.AdmissionError, match="more than its context's reservation"):
            await sched.run(batch, job, "too big", name="too big", memory=8 * GB)

        async def boom() -> None:
            raise KeyError("boom")

        with pytest.raises(KeyError):
            await sched.run(batch, boom, name="boom")

    asyncio.run(main())
    assert order.index("end high") < order.index("start low"), "priority orders the queue"
    assert order[:2] == ["start a", "end a"]
    tasks = {t["name"]: t for t in s.snapshot()["tasks"]}
    assert tasks["boom"]["state"] == "failed" and "KeyError" in tasks["boom"]["reason"]
    assert tasks["too big"]["state"] == "failed"
    cancelled = [t for t in s.snapshot()["tasks"] if t["state"] == "cancelled"]
    assert len(cancelled) == 1 and cancelled[0]["admitted_ms"] is None
    done = [t for t in s.snapshot()["tasks"] if t["state"] == "completed"]
    assert len(done) == 3 and all(t["started_ms"] <= t["finished_ms"] for t in done)
    counts = s.snapshot()["contexts"][1]["tasks"]
    assert (counts["completed"], counts["failed"], counts["cancelled"]) == (3, 2, 1)


def test_blocking_task_waits_for_admission_in_another_thread(s: sched.Scheduler) -> None:
    batch = s.create_context("batch", qos="best_effort")
    first = batch.task("first", memory=5 * GB)
    first.__enter__()
    result: list[str] = []

    def second() -> None:
        with batch.task("second", memory=5 * GB) as t:
            result.append(str(t.state))

    th = threading.Thread(target=second)
    th.start()
    time.sleep(0.05)
    assert result == [] and th.is_alive(), "waits: 10 GiB claimed of 8 GiB"
    first.__exit__(None, None, None)
    th.join(timeout=5)
    assert result == ["running"]
    assert first.state == "completed"


def test_closing_a_context_returns_its_reservation_and_sms(s: sched.Scheduler) -> None:
    g = s.create_context("g", max_vram=6 * GB, sm_share=0.5)
    assert g.planned_sms == 50 and g.placement == "exclusive"
    with pytest.raises(sched.AdmissionError, match="does not fit"):
        s.create_context("h", max_vram=4 * GB)
    g.close()
    g.close()  # idempotent
    assert s.create_context("h", max_vram=4 * GB).reservation == 4 * GB
    with pytest.raises(RuntimeError, match="closed"), context_session(g):
        pass


def test_sched_cli_explains_decisions() -> None:
    r = subprocess.run(
        [
            sys.executable, "-m", "pygpukit", "sched", "--device", "cpu", "--sm-count", "100",
            "--context", "chat,qos=guaranteed,max_vram=4GB,sm_share=0.5",
            "--context", "big,max_vram=1000TB",
            "--context", "batch,qos=best_effort,pace=0.4",
            "--task", "batch,name=etl,memory=1GB",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "chat" in out and "guaranteed" in out and "50 (exclusive" in out
    assert "context 'big': refused" in out and "does not fit" in out
    assert "task 'etl' of context 'batch': admitted" in out
    bad = subprocess.run(
        [sys.executable, "-m", "pygpukit", "sched", "--context", "x,size=1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "size=1" in bad.stderr


def test_create_context_checks_arguments(s: sched.Scheduler) -> None:
    with pytest.raises(TypeError, match="max_vram"):
        s.create_context("x", max_vram="4GB")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reservation"):
        s.create_context("x", reservation=-5)
    with pytest.raises(TypeError, match="sm_share"):
        s.create_context("x", sm_share="half")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pace"):
        s.create_context("x", pace=True)
    assert s.contexts() == []


def test_a_task_a_later_reservation_makes_impossible_fails_its_waiter(
    s: sched.Scheduler,
) -> None:
    batch = s.create_context("batch", qos="best_effort")
    first = batch.task("first", memory=5 * GB)
    first.__enter__()
    errors: list[str] = []

    def second() -> None:
        try:
            with batch.task("second", memory=7 * GB):
                pass
        except RuntimeError as e:
            errors.append(str(e))

    th = threading.Thread(target=second)
    th.start()
    time.sleep(0.05)
    s.create_context("g", max_vram=2 * GB)  # 6 GiB unreserved: 7 can never fit now
    first.__exit__(None, None, None)
    th.join(timeout=5)
    assert not th.is_alive(), "the waiter was woken"
    assert errors and "failed before it could run" in errors[0] and "unreserved" in errors[0]


def test_a_failed_wait_at_exit_records_the_task_failed(s: sched.Scheduler) -> None:
    batch = s.create_context("batch", qos="best_effort")
    t = batch.task("t")
    t.__enter__()
    real = sched.tasks.Completion

    class Broken:
        def __init__(self, stream: Any) -> None:
            pass

        def wait(self) -> None:
            raise OSError("device lost")

    sched.tasks.Completion = Broken  # type: ignore[assignment,misc]
    try:
        with pytest.raises(OSError):
            t.__exit__(None, None, None)
    finally:
        sched.tasks.Completion = real  # type: ignore[misc]
    assert t.state == "failed" and "device lost" in (t.info() or {})["reason"]
    batch.close()  # nothing left running


@pytest.mark.parametrize(
    "text, n",
    [("4096", 4096), ("4096B", 4096), ("512MB", 512 << 20), ("1.5 GiB", 3 << 29), ("2k", 2048)],
)
def test_parse_bytes(text: str, n: int) -> None:
    from pygpukit._units import parse_bytes

    assert parse_bytes(text) == n


@pytest.mark.parametrize("text", ["4ib", "1.5b", "1.5", "-1GB", "GB", "4 XB", ""])
def test_parse_bytes_refuses(text: str) -> None:
    from pygpukit._units import parse_bytes

    with pytest.raises(ValueError):
        parse_bytes(text)
