"""GPU machine: round trips, strided copies, fills, OOM and quotas on the device."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp
from pygpukit import _core
from pygpukit.dtypes import ALL_DTYPES

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(7)


def _random(shape: tuple[int, ...], dt: gp.DataType) -> np.ndarray:
    if dt.is_packed:
        return RNG.integers(-8, 8, size=shape).astype(dt.np_dtype)
    if dt.kind == "b":
        return np.asarray(RNG.random(shape) < 0.5)
    if dt.is_integer:
        return RNG.integers(-100 if dt.kind == "i" else 0, 100, size=shape).astype(dt.np_dtype)
    return RNG.standard_normal(shape).astype(dt.np_dtype)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1,), (2, 4098), (3, 5, 8), (4097,)])
def test_round_trip_every_dtype(dt: gp.DataType, shape: tuple[int, ...], cuda: str) -> None:
    if dt.is_packed and shape[-1] % 2:
        pytest.skip("packed int4 needs an even last dim")
    host = _random(shape, dt)
    a = gp.from_numpy(host, device=cuda)
    assert a.device.type == "cuda" and a.dtype is dt
    np.testing.assert_array_equal(a.to_numpy().astype(np.float64), host.astype(np.float64))
    if not dt.is_packed:
        np.testing.assert_array_equal(
            a.cpu().to_numpy().astype(np.float64), host.astype(np.float64)
        )


@pytest.mark.parametrize(
    "key",
    [
        (slice(None), slice(None, None, 3)),
        (slice(1, None), slice(None, None, -1)),
        (slice(None, None, 2), 5),
        (Ellipsis, slice(2, 9)),
    ],
)
def test_strided_views_copy_exactly(key: tuple, cuda: str) -> None:  # type: ignore[type-arg]
    host = RNG.standard_normal((37, 41)).astype(np.float32)
    a = gp.from_numpy(host, device=cuda)
    np.testing.assert_array_equal(a[key].to_numpy(), host[key])
    np.testing.assert_array_equal(a.T[key].contiguous().to_numpy(), host.T[key])


def test_permute_heads_and_broadcast(cuda: str) -> None:
    host = RNG.standard_normal((2, 9, 4, 16)).astype(ml_dtypes.bfloat16)
    a = gp.from_numpy(host, device=cuda)
    np.testing.assert_array_equal(
        a.permute(0, 2, 1, 3).contiguous().to_numpy(), host.transpose(0, 2, 1, 3)
    )
    row = gp.from_numpy(np.arange(8, dtype=np.float32), device=cuda)
    np.testing.assert_array_equal(
        row.broadcast_to((3, 8)).contiguous().to_numpy(),
        np.broadcast_to(np.arange(8, dtype=np.float32), (3, 8)),
    )


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("float64", 1.5),
        ("int64", -(2**40) - 3),
        ("float32", -2.25),
        ("bfloat16", 3.0),
        ("float16", 0.5),
        ("int8", -7),
        ("bool", True),
        ("int32", 123456),
    ],
)
def test_fill_patterns(dtype: str, value: object, cuda: str) -> None:
    a = gp.full((1, 1027), value, dtype=dtype, device=cuda)
    np.testing.assert_array_equal(
        a.to_numpy(), np.full((1, 1027), value, gp.as_dtype(dtype).np_dtype)
    )
    b = gp.zeros((6, 7), dtype=dtype, device=cuda)
    b[:, 1::3] = value
    ref = np.zeros((6, 7), gp.as_dtype(dtype).np_dtype)
    ref[:, 1::3] = value
    np.testing.assert_array_equal(b.to_numpy(), ref)


def test_oom_raises_with_stats_and_pool_survives(cuda: str) -> None:
    total = gp.get_device_properties(cuda)["total_memory"]
    before = gp.memory_stats(cuda)
    with pytest.raises(gp.OutOfMemoryError) as info:
        gp.empty((2 * total,), gp.uint8, device=cuda)
    err = info.value
    assert err.requested == 2 * total
    assert isinstance(err.stats, dict) and "current_bytes" in err.stats
    assert str(2 * total) in str(err)
    after = gp.memory_stats(cuda)
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert after["num_retries"] == before["num_retries"] + 1
    assert after["current_bytes"] == before["current_bytes"]
    x = gp.ones((1 << 20,), gp.float32, device=cuda)
    assert float(x[123]) == 1.0


def test_context_quota_on_device(cuda: str) -> None:
    ctx = gp.Context("gpu-quota", max_vram=1 << 20, device=cuda)
    with ctx:
        a = gp.empty((1 << 19,), gp.uint8)
        assert a.owner.pool_name == "gpu-quota"
        with pytest.raises(gp.QuotaExceededError, match="gpu-quota"):
            gp.empty((1 << 20,), gp.uint8)
        del a
        b = gp.empty((1 << 20,), gp.uint8)
        assert ctx.memory_stats()["current_bytes"] == 1 << 20
        del b
    assert ctx.memory_stats()["current_bytes"] == 0
    assert ctx.memory_stats()["quota_rejections"] == 1


def test_streams_and_events_on_device(cuda: str) -> None:
    s = gp.Stream(device=0, priority=gp.Stream.priority_range(0)[1])
    start, end = gp.Event(device=0), gp.Event(device=0)
    with gp.stream(s):
        start.record(s)
        a = gp.ones((1 << 24,), gp.float32)
        end.record(s)
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 0.0
    assert a.owner.stream == s
    assert float(a[-1]) == 1.0
    assert _core.take_deferred_errors() == []


def test_async_host_copies_via_pinned_staging(cuda: str) -> None:
    host = RNG.standard_normal(1 << 16).astype(np.float32)
    a = gp.empty(host.shape, gp.float32, device=cuda)
    s = gp.current_stream(cuda)
    _core.copy_htod_async(a.data_ptr(), host.ctypes.data, host.nbytes, s)
    host_copy = host.copy()
    host[:] = 0  # the staged copy must not see this write
    pending = _core.copy_dtoh_async(a.data_ptr(), host.nbytes, s)
    out = np.empty_like(host)
    pending.wait_into(out.ctypes.data)
    np.testing.assert_array_equal(out, host_copy)
