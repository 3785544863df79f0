"""Runtime facade on any machine: devices, streams, events, contexts, pool quotas and stats."""

from __future__ import annotations

import time

import pytest

import pygpukit as gp
from pygpukit import _core


def test_device_parsing() -> None:
    assert str(gp.device("cpu")) == "cpu"
    assert gp.device("cpu") is gp.Device("cpu")
    assert gp.default_device() in (gp.device("cpu"), gp.Device("cuda", 0))
    with pytest.raises(ValueError, match="invalid device 'cuda:x'"):
        gp.device("cuda:x")
    with pytest.raises(TypeError, match="invalid device"):
        gp.device(1.5)


def test_cuda_absent_is_reported_not_raised() -> None:
    ok, reason = _core.driver_status()
    assert gp.is_cuda_available() == (ok and _core.device_count() > 0)
    if not gp.is_cuda_available():
        assert reason or _core.device_count() == 0
        with pytest.raises(gp.NoDeviceError, match="cuda:0 is not available"):
            gp.device("cuda:0")


def test_current_stream_switches_per_block() -> None:
    dev = gp.default_device()
    base = gp.current_stream(dev)
    s = gp.Stream(device=dev.core_index)
    with gp.stream(s):
        assert gp.current_stream(dev) == s
        with gp.stream(base):
            assert gp.current_stream(dev) == base
        assert gp.current_stream(dev) == s
    assert gp.current_stream(dev) == base
    with pytest.raises(TypeError, match="pygpukit Stream"):
        with gp.stream("s"):  # type: ignore[arg-type]
            pass


def test_host_events_time_on_cpu() -> None:
    s = gp.Stream(device=-1)
    a, b = gp.Event(device=-1), gp.Event(device=-1)
    a.record(s)
    time.sleep(0.01)
    b.record(s)
    b.synchronize()
    assert a.query() and b.query()
    assert 5.0 <= a.elapsed_time(b) < 1000.0


def test_context_quota_is_enforced_and_failure_changes_no_counter() -> None:
    ctx = gp.Context("quota-test", max_vram=4096, device="cpu")
    with ctx:
        a = gp.empty((512,), gp.float32)  # 2048 bytes
        before = ctx.memory_stats()
        with pytest.raises(gp.QuotaExceededError) as info:
            gp.empty((1024,), gp.float32)  # 4096 more would exceed 4096
        err = info.value
        assert isinstance(err, gp.OutOfMemoryError) and isinstance(err, MemoryError)
        assert "quota-test" in str(err) and "4096" in str(err)
        after = ctx.memory_stats()
        for key in (
            "current_bytes",
            "peak_bytes",
            "allocated_bytes",
            "freed_bytes",
            "num_allocs",
            "num_frees",
        ):
            assert after[key] == before[key], key
        assert after["quota_rejections"] == before["quota_rejections"] + 1
        b = gp.empty((512,), gp.float32)  # still fits: the pool is usable after the failure
        assert ctx.memory_stats()["current_bytes"] == 4096
        del a, b
    stats = ctx.memory_stats()
    assert stats["current_bytes"] == 0
    assert stats["allocated_bytes"] == stats["freed_bytes"] == 4096
    assert stats["peak_bytes"] == 4096 and stats["name"] == "quota-test"


def test_views_keep_memory_alive() -> None:
    ctx = gp.Context("lifetime", device="cpu")
    with ctx:
        a = gp.arange(10)
        v = a[2:5]
    del a
    assert ctx.memory_stats()["current_bytes"] == 80
    assert v.to_numpy().tolist() == [2, 3, 4]
    del v
    assert ctx.memory_stats()["current_bytes"] == 0


def test_memory_pool_0_2_call_form() -> None:
    pool = _core.MemoryPool(quota=8192, enable_eviction=True, device=-1)
    buf = pool.allocate(4096)
    assert buf.nbytes == 4096 and buf.ptr != 0
    with pytest.raises(gp.QuotaExceededError):
        pool.allocate(8192)
    buf.free()
    buf.free()  # idempotent
    with pytest.raises(ValueError, match="freed"):
        _ = buf.ptr
    assert pool.stats()["current_bytes"] == 0
    with pytest.raises((ValueError, OverflowError)):
        pool.allocate(-1)


def test_zero_byte_allocations() -> None:
    a = gp.empty((0, 5), device="cpu")
    assert a.size == 0 and a.to_numpy().shape == (0, 5)


def test_no_deferred_errors_left_behind() -> None:
    assert _core.take_deferred_errors() == []
