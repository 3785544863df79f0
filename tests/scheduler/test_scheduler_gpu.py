"""GPU machine: the scheduler on a real device. Green-context partitions run every launch path
(Triton, native kernels, cuBLASLt, CUDA graph capture and replay) with exact results, quotas
hold per context, admission refuses with the device's numbers, and pacing throttles a BestEffort
context only while a Guaranteed one is active."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import scheduler as sched

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(11)


@pytest.fixture
def scheduler(cuda: str) -> Iterator[sched.Scheduler]:
    sched.shutdown()
    s = sched.initialize(0)
    yield s
    s.shutdown()


def _green(s: sched.Scheduler) -> bool:
    return s.snapshot()["sm_total"] is not None


def test_partitions_run_every_launch_path_exactly(scheduler: sched.Scheduler) -> None:
    if not _green(scheduler):
        pytest.skip(scheduler.snapshot()["sm_note"])
    g = scheduler.create_context("g", max_vram=1 << 30, sm_share=0.25)
    b = scheduler.create_context("b", qos="best_effort")
    total = scheduler.snapshot()["sm_total"]
    assert g.placement == "exclusive" and g.sm_count == g.planned_sms
    assert g.sm_count % 8 == 0 and g.sm_count >= 0.25 * total
    assert b.placement == "shared" and b.sm_count == total - g.sm_count
    assert g.stream.partition_id != 0 and g.stream.partition_id != b.stream.partition_id
    x = (0.25 * RNG.standard_normal((257, 129))).astype(np.float32)
    x64 = x.astype(np.float64)
    w = RNG.standard_normal((129, 65)).astype(np.float32)
    for ctx in (g, b):
        with sched.context_session(ctx):
            assert gp.current_stream() == ctx.stream
            a = gp.from_numpy(x)
            m = gp.from_numpy(w)
            sm = gp.softmax(a).to_numpy()  # Triton
            with gp.route("softmax:native"):
                sn = gp.softmax(a).to_numpy()  # native kernel
            mm = gp.matmul(a, m).to_numpy()  # cuBLASLt (fp32, exact mode)
            y = gp.empty((257, 129), gp.float32)
            gp.exp(a, out=y)
            graph = gp.CUDAGraph()
            with graph.capture():
                z = gp.exp(y * 0.5)
            a[:] = x * 2
            gp.exp(a, out=y)
            graph.replay()
            got = z.to_numpy()
        ref = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        np.testing.assert_allclose(sm, ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sn, ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mm, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(got, np.exp(np.exp(2.0 * x64) * 0.5), rtol=1e-5)
        assert graph._recorded_on.partition_id == ctx.stream.partition_id


def test_quota_of_best_effort_leaves_guaranteed_alone(scheduler: sched.Scheduler) -> None:
    g = scheduler.create_context("g", max_vram=256 << 20)
    b = scheduler.create_context("b", 64 << 20, qos="best_effort")
    with sched.context_session(g):
        kept = gp.empty((32 << 20,), gp.float32)  # 128 MiB of g's 256
    with sched.context_session(b):
        small = gp.empty((8 << 20,), gp.float32)
        with pytest.raises(gp.QuotaExceededError) as e:
            gp.empty((16 << 20,), gp.float32)
        assert e.value.context == "b" and e.value.quota == 64 << 20
    with sched.context_session(g):
        more = gp.empty((31 << 20,), gp.float32)
    assert g.memory_stats()["current_bytes"] == (63 << 20) * 4
    assert g.memory_stats()["num_ooms"] == 0 and g.memory_stats()["quota_rejections"] == 0
    # The reservation is held in g's pool: with nothing allocated, trims still keep it.
    del kept, more, small
    gp.synchronize()
    gp.runtime.empty_cache()
    with sched.context_session(g):
        gp.empty_cache()
    assert g.memory_stats()["current_bytes"] == 0
    assert g.memory_stats()["reserved_bytes"] >= 256 << 20
    with sched.context_session(b):
        gp.empty_cache()
    assert b.memory_stats()["reserved_bytes"] == 0, "a BestEffort pool keeps nothing"


def test_admission_refuses_a_reservation_beyond_unreserved(scheduler: sched.Scheduler) -> None:
    snap = scheduler.snapshot()
    cap = snap["capacity"]
    free, total = gp._core.mem_get_info(0)
    assert 0 < cap <= total
    with pytest.raises(sched.AdmissionError) as e:
        scheduler.create_context("huge", max_vram=cap + (1 << 30))
    msg = str(e.value)
    assert "huge" in msg and str(cap + (1 << 30)) in msg and str(cap) in msg
    assert e.value.requested == cap + (1 << 30) and e.value.unreserved == cap
    assert scheduler.snapshot()["contexts"] == []
    assert scheduler.snapshot()["decisions"][-1]["outcome"] == "refused"
    assert gp._core.mem_get_info(0)[0] >= free - (64 << 20), "a refusal holds no memory"


def test_best_effort_is_paced_only_while_guaranteed_is_active(scheduler: sched.Scheduler) -> None:
    g = scheduler.create_context("g", max_vram=256 << 20)
    b = scheduler.create_context("b", qos="best_effort", pace=0.25)
    n = 1 << 26  # 256 MiB of fp32: about 0.2 ms an add on an H100
    with sched.context_session(b):
        x = gp.ones((n,), gp.float32)
        y = gp.empty((n,), gp.float32)
        for _ in range(20):
            gp.add(x, x, out=y)
        gp.synchronize()
    assert b.pacing_stats()["paced_launches"] == 0, "nothing Guaranteed was active"
    with sched.context_session(g):
        tiny = gp.ones((16,), gp.float32)
    t0 = time.perf_counter()
    with sched.context_session(b):
        for _ in range(60):
            with sched.context_session(g):
                gp.add(tiny, tiny)  # keeps g active
            gp.add(x, x, out=y)
        gp.synchronize()
    wall = time.perf_counter() - t0
    st = b.pacing_stats()
    assert st["paced_launches"] >= 50 and st["waits"] > 0
    assert st["busy_ms"] / 1e3 / wall < 0.35, st
    np.testing.assert_array_equal(y.to_numpy()[:8], np.full(8, 2.0, np.float32))


def test_several_partitions_are_carved_closed_and_carved_again(
    scheduler: sched.Scheduler,
) -> None:
    if not _green(scheduler):
        pytest.skip(scheduler.snapshot()["sm_note"])
    snap = scheduler.snapshot()
    total, carvable = snap["sm_total"], snap["sm_carvable"]
    assert carvable % 8 == 0 and 0.85 * total <= carvable <= total
    a = scheduler.create_context("a", max_vram=64 << 20, sm_share=0.5)
    b = scheduler.create_context(
        "b", 128 << 20, qos="burstable", reservation=64 << 20, sm_share=0.25
    )
    c = scheduler.create_context("c", qos="best_effort", sm_share=0.05)
    assert (a.sm_count, b.sm_count, c.sm_count) == (a.planned_sms, b.planned_sms, c.planned_sms)
    used = a.sm_count + b.sm_count + c.sm_count
    assert scheduler.snapshot()["sm_free"] == total - used
    b.close()
    c.close()
    assert scheduler.snapshot()["sm_free"] == total - a.sm_count
    d = scheduler.create_context("d", max_vram=64 << 20, sm_share=0.3)
    e = scheduler.create_context("e", qos="best_effort")
    assert e.placement == "shared" and e.sm_count == total - a.sm_count - d.sm_count
    x = (0.1 * RNG.standard_normal((1000,))).astype(np.float32)
    for ctx in (a, d, e):
        with sched.context_session(ctx):
            np.testing.assert_allclose(gp.exp(gp.from_numpy(x)).to_numpy(), np.exp(x), rtol=1e-6)
