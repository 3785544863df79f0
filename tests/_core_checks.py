"""Checks of the extension `pygpukit._core` on its own (run through tests/test_core_binding.py).

Host part always runs (device -1: host pool, host streams/events, host copies, DLPack with
kDLCPU and numpy). The device part runs when a CUDA device is present. Needs numpy; uses torch
for interop checks when importable. Exits non-zero on the first failure.
"""

import gc
import sys
import threading
import time

import numpy as np
import pygpukit._core as c

STATS_KEYS = {
    "current_bytes",
    "peak_bytes",
    "allocated_bytes",
    "freed_bytes",
    "reserved_bytes",
    "used_bytes",
    "num_allocs",
    "num_frees",
    "num_retries",
    "num_ooms",
    "quota_rejections",
    "quota",
    "name",
    "device",
}
COUNTERS = (
    "current_bytes",
    "peak_bytes",
    "allocated_bytes",
    "freed_bytes",
    "num_allocs",
    "num_frees",
)


def raises(exc, fn, *args, match=None, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        if match is not None and match not in str(e):
            raise AssertionError(f"{exc.__name__} raised, but {match!r} not in {e!s}") from e
        return e
    raise AssertionError(f"{exc.__name__} not raised by {fn}")


def counters(pool):
    s = pool.stats()
    return {k: s[k] for k in COUNTERS}


def check_exceptions():
    assert issubclass(c.CudaError, RuntimeError)
    assert issubclass(c.OutOfMemoryError, MemoryError)
    assert issubclass(c.QuotaExceededError, c.OutOfMemoryError)
    assert issubclass(c.NoDeviceError, RuntimeError)
    assert issubclass(c.CaptureError, RuntimeError) and not issubclass(c.CaptureError, c.CudaError)
    assert c.MemoryPool is c.Pool
    assert c.take_deferred_errors() == []


def check_no_driver():
    ok, reason = c.driver_status()
    assert ok is False and reason, (ok, reason)
    assert c.device_count() == 0
    raises(c.NoDeviceError, c.driver_version)
    raises(c.NoDeviceError, c.device_properties, 0)
    raises(c.NoDeviceError, c.mem_get_info, 0)
    raises(c.NoDeviceError, c.Pool, device=0)
    raises(c.NoDeviceError, c.Stream)  # device=0 by default
    raises(c.NoDeviceError, c.Event, 0)
    raises(c.NoDeviceError, c.Stream.external, 1, 0)
    c.synchronize_device(-1)
    print("no-driver: ok:", reason)


def check_host_pool():
    assert c.Pool().device == (0 if c.device_count() else -1)
    p = c.Pool(device=-1)
    assert p.device == -1 and p.name == "default" and p.quota is None and p.enable_eviction
    b = p.allocate(4096)
    assert b.ptr % 64 == 0 and b.nbytes == 4096 and b.device == -1 and b.pool_name == "default"
    assert b.stream == c.Stream(device=-1) and b.stream.handle == 0
    s = p.stats()
    assert set(s) == STATS_KEYS, set(s) ^ STATS_KEYS
    assert (s["current_bytes"], s["num_allocs"], s["device"]) == (4096, 1, -1)
    b.free()
    b.free()  # idempotent
    raises(ValueError, lambda: b.ptr, match="buffer was freed")
    assert p.stats()["current_bytes"] == 0 and p.stats()["num_frees"] == 1
    z = p.allocate(0)
    assert z.ptr == 0 and z.nbytes == 0
    del z
    raises(ValueError, p.allocate, -1, match="nbytes")
    raises(TypeError, p.allocate, "x")

    # 0.2.x form; quota errors change no counter.
    q = c.MemoryPool(quota=1000, enable_eviction=True)
    a = q.allocate(600)
    before = counters(q)
    e = raises(c.QuotaExceededError, q.allocate, 500)
    assert isinstance(e, c.OutOfMemoryError) and isinstance(e, MemoryError)
    assert (e.requested, e.context, e.quota, e.current) == (500, "default", 1000, 600), vars(e)
    assert "500" in str(e) and "1000" in str(e)
    assert counters(q) == before
    assert q.stats()["quota_rejections"] == 1 and q.stats()["num_ooms"] == 0
    raises(ValueError, setattr, q, "quota", -1)
    q.quota = None
    bb = q.allocate(500)
    assert q.stats()["current_bytes"] == 1100 and q.stats()["peak_bytes"] == 1100
    q.quota = 2000
    assert q.quota == 2000
    del a, bb
    gc.collect()
    assert q.stats()["current_bytes"] == 0
    raises(ValueError, c.Pool, quota=-5, match="quota")
    named = c.Pool(device=-1, name="llm", quota=1 << 20, enable_eviction=False)
    assert named.name == "llm" and not named.enable_eviction and named.quota == 1 << 20
    print("host pool: ok", p.stats())


def check_host_streams_events():
    s = c.Stream(device=-1)
    assert s.handle == 0 and s.device == -1 and s.priority == 0
    s.synchronize()
    assert s.query() is True
    assert c.Stream.priority_range(-1) == (0, 0)
    assert hash(s) == hash(c.Stream(device=-1)) and s == c.Stream(-1) and s != 3
    e0 = s.record_event()
    time.sleep(0.02)
    e1 = c.Event(device=-1)
    assert e1.record(s) is None
    e1.synchronize()
    assert e1.query()
    ms = e0.elapsed_time(e1)
    assert 15.0 <= ms < 5000.0, ms
    s.wait_event(e0)
    raises(ValueError, c.Event(-1, enable_timing=False).elapsed_time, e1)
    print(f"host stream/event: ok, elapsed {ms:.2f} ms")


def addr(a):
    return a.ctypes.data


def check_copies(pool, stream):
    """Round trips through pool memory on `stream` (host or device)."""
    rng = np.random.default_rng(0)
    n = 1 << 16
    src = rng.integers(0, 256, n, dtype=np.uint8)
    d1 = pool.allocate(n, stream)
    d2 = pool.allocate(n, stream)
    c.memcpy_htod(d1, addr(src), n, stream)
    c.memcpy_dtod(d2.ptr, d1, n, stream)
    out = np.zeros(n, np.uint8)
    c.memcpy_dtoh(addr(out), d2, n, stream)
    assert np.array_equal(out, src)
    c.memset_d32(d1, 0xDEADBEEF, n // 4, stream)
    c.memcpy_dtoh(addr(out), d1, n, stream)
    assert (out.view(np.uint32) == 0xDEADBEEF).all()
    c.memset_d16(d1, 0x1234, 4, stream)
    c.memset_d8(d1.ptr + 8, 7, 8, stream)
    c.memcpy_dtoh(addr(out), d1, 16, stream)
    assert (out[:8].view(np.uint16) == 0x1234).all() and (out[8:16] == 7).all()
    # 2D: a 5x3 block from a host array of pitch 10 into device memory of pitch 4, and back
    # into a host array of pitch 3.
    h = np.arange(50, dtype=np.uint8).reshape(5, 10)
    c.memcpy_2d(d1, 4, addr(h), 10, 3, 5, stream)
    back = np.zeros((5, 3), np.uint8)
    c.memcpy_2d(addr(back), 3, d1, 4, 3, 5, stream)
    stream.synchronize()
    assert np.array_equal(back, h[:, :3]), back
    # Async host copies through staging; the source is reused at once.
    src2 = src.copy()
    c.copy_htod_async(d2, addr(src2), n, stream)
    src2[:] = 0
    pend = c.copy_dtoh_async(d2, n, stream)
    out2 = np.zeros(n, np.uint8)
    pend.wait_into(addr(out2))
    assert pend.ready() and pend.nbytes == n and np.array_equal(out2, src)
    # Argument checks.
    raises(ValueError, c.memcpy_htod, d1, addr(src), n + 1, stream, match="dst")
    raises(ValueError, c.memcpy_htod, d1, addr(src), -1, stream, match="nbytes")
    raises(ValueError, c.memcpy_htod, 0, addr(src), 8, stream, match="null")
    raises(TypeError, c.memcpy_htod, "x", addr(src), 8, stream)
    raises(ValueError, c.memset_d32, d1.ptr + 2, 0, 1, stream, match="aligned")
    d1.free()
    raises(ValueError, c.memcpy_dtoh, addr(out), d1, 8, stream, match="freed")


def check_dlpack_host():
    pool = c.Pool(device=-1)
    a = pool.allocate(24 * 4)
    vals = np.arange(24, dtype=np.float32)
    c.memcpy_htod(a, addr(vals), vals.nbytes, c.Stream(-1))

    # Export / import between two host buffers; the owner is held until the consumer is done.
    refs0 = sys.getrefcount(a)
    cap = c.dlpack_export(a, a.ptr, [2, 3, 4], None, 2, 32, 1, 1, 0)
    assert sys.getrefcount(a) == refs0 + 1
    t = c.dlpack_import(cap)
    assert (t.ptr, t.shape, t.strides) == (a.ptr, (2, 3, 4), (12, 4, 1))
    assert t.dtype == (2, 32, 1) and t.device == (1, 0) and not t.read_only and not t.versioned
    raises(ValueError, c.dlpack_import, cap, match="already consumed")
    del cap
    gc.collect()
    assert sys.getrefcount(a) == refs0 + 1, "a consumed capsule must not release the owner"
    b = pool.allocate(24 * 4)
    c.memcpy_dtod(b, t.ptr, 96, c.Stream(-1))
    got = np.zeros(24, np.float32)
    c.memcpy_dtoh(addr(got), b, 96, c.Stream(-1))
    assert np.array_equal(got, vals)
    del t
    gc.collect()
    assert sys.getrefcount(a) == refs0, "the deleter releases the owner"

    # An unconsumed capsule releases its owner when it dies.
    cap = c.dlpack_export(a, a.ptr, [24], [1], 2, 32, 1, 1, 0, versioned=True)
    assert sys.getrefcount(a) == refs0 + 1
    del cap
    gc.collect()
    assert sys.getrefcount(a) == refs0
    tv = c.dlpack_import(c.dlpack_export(a, a.ptr, [6, 4], [1, 6], 2, 32, 1, 1, 0, versioned=True))
    assert tv.versioned and tv.strides == (1, 6) and not tv.read_only
    del tv
    raises(ValueError, c.dlpack_import, 5)
    raises(ValueError, c.dlpack_export, a, a.ptr, [2, 3], [1], 2, 32, 1, 1, 0)

    # numpy consumes our capsule (legacy and, on numpy >= 2.1, versioned).
    class Holder:
        def __init__(self, buf, shape, versioned_ok):
            self.buf, self.shape, self.versioned_ok = buf, shape, versioned_ok
            self.calls = []

        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            versioned = bool(self.versioned_ok and max_version and max_version[0] >= 1)
            self.calls.append(versioned)
            return c.dlpack_export(
                self, self.buf.ptr, list(self.shape), None, 2, 32, 1, 1, 0, versioned=versioned
            )

        def __dlpack_device__(self):
            return (1, 0)

    for versioned_ok in (False, True):
        h = Holder(a, (4, 6), versioned_ok)
        r0 = sys.getrefcount(h)
        arr = np.from_dlpack(h)
        assert arr.shape == (4, 6) and arr.dtype == np.float32
        assert arr.ctypes.data == a.ptr, "zero-copy"
        assert np.array_equal(arr.ravel(), vals)
        assert sys.getrefcount(h) == r0 + 1
        del arr
        gc.collect()
        assert sys.getrefcount(h) == r0
        print(f"numpy.from_dlpack: ok (versioned capsule used: {h.calls})")

    # And we consume numpy's capsules.
    x = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    t = c.dlpack_import(x.__dlpack__())
    assert t.ptr == x.ctypes.data and t.shape == (3, 2) and t.strides == (4, 2)
    assert t.dtype == (0, 64, 1)
    try:
        tv = c.dlpack_import(x.__dlpack__(max_version=(1, 0)))
        assert tv.versioned and tv.ptr == x.ctypes.data
    except TypeError:
        pass  # numpy < 2.1 has no max_version
    print("dlpack host: ok")


def check_threads(pool, stream):
    gc.collect()
    s0 = pool.stats()
    errors = []

    def work():
        try:
            for i in range(2000):
                b = pool.allocate(64 + i % 512, stream)
                del b
        except Exception as e:
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    s = pool.stats()
    live0 = s0["num_allocs"] - s0["num_frees"]
    assert s["num_allocs"] - s["num_frees"] == live0, (s0, s)
    assert s["num_allocs"] - s0["num_allocs"] == 8000, (s0, s)
    assert s["current_bytes"] == s0["current_bytes"], (s0, s)


def check_gil_released(pool, s):
    """Another Python thread must run while this one waits in Stream.synchronize."""
    n = 8 << 30
    a, b = pool.allocate(n, s), pool.allocate(n, s)
    stamps = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)

    for _ in range(20):  # 20 x 16 GiB moved: tens of ms of device work, queued in 20 calls
        c.memcpy_dtod(a, b, n, s)
    t = threading.Thread(target=spin)
    t.start()
    t0 = time.perf_counter()
    s.synchronize()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [x for x in stamps if t0 + 0.01 < x < t1 - 0.001]
    print(f"GIL: sync waited {(t1 - t0) * 1e3:.0f} ms; other thread ran {len(inside)} times inside")
    assert t1 - t0 > 0.02, "not enough device work to tell"
    assert inside, "the GIL was held while waiting"
    del a, b


def check_device():
    ok, reason = c.driver_status()
    assert ok and reason == "", reason
    n = c.device_count()
    props = c.device_properties(0)
    free, total = c.mem_get_info(0)
    print(f"driver {c.driver_version()}, {n} device(s):", props)
    assert props["total_memory"] == total and 0 < free <= total and len(props["uuid"]) == 32
    raises(ValueError, c.device_properties, n)

    pool = c.Pool(name="gpu")
    assert pool.device == 0
    b = pool.allocate(1 << 20)
    assert b.device == 0 and b.stream == pool.default_stream and b.ptr != 0
    _least, greatest = c.Stream.priority_range(0)
    hi = c.Stream(0, priority=greatest)
    assert hi.priority == greatest and hi.handle not in (0, 1, 2)
    raises(ValueError, pool.allocate, 16, c.Stream(-1))
    s = c.Stream(0)
    check_copies(pool, s)
    check_threads(pool, s)
    for h in (1, 2):
        ext = c.Stream.external(h, 0)
        assert ext.handle == h
        ext.synchronize()

    # Events time device work.
    e0, e1 = c.Event(0), c.Event(0, blocking=True)
    big = pool.allocate(256 << 20, s)
    e0.record(s)
    for _ in range(10):
        c.memset_d32(big, 1, (256 << 20) // 4, s)
    e1.record(s)
    e1.synchronize()
    ms = e0.elapsed_time(e1)
    assert e1.query() and ms > 0, ms
    print(f"device memset 2.5 GiB: {ms:.3f} ms ({10 * 256 / 1024 / (ms / 1e3):.0f} GiB/s)")
    del big
    check_gil_released(pool, s)

    st = pool.stats()
    assert st["reserved_bytes"] >= st["used_bytes"] > 0, st
    del b
    s.synchronize()
    pool.default_stream.synchronize()
    pool.trim()
    print("device pool after trim:", pool.stats())

    # OOM ladder on a real device: more than the device has.
    e = raises(c.OutOfMemoryError, pool.allocate, total + (1 << 30), s)
    assert not isinstance(e, c.QuotaExceededError)
    assert e.stats["num_ooms"] == 1 and e.stats["num_retries"] == 1, e.stats
    assert e.device_total == total and e.device == 0
    assert e.device_free > total // 2, "a failed request must not leave the device reserved"
    assert pool.stats()["reserved_bytes"] == pool.stats()["used_bytes"]
    st = pool.stats()
    assert (st["num_ooms"], st["num_retries"]) == (1, 1) and st["current_bytes"] == 0, st
    noev = c.Pool(name="noev", enable_eviction=False)
    e = raises(c.OutOfMemoryError, noev.allocate, total + (1 << 30))
    assert noev.stats()["num_retries"] == 0 and noev.stats()["reserved_bytes"] == 0
    assert c.mem_get_info(0)[0] > total // 2
    print("OOM:", str(e)[:160], "...")

    q = c.Pool(name="q", quota=1 << 20)
    keep = q.allocate(1 << 19)
    raises(c.QuotaExceededError, q.allocate, 1 << 20)
    del keep

    # Device DLPack export.
    d = pool.allocate(16 * 4, s)
    vals = np.arange(16, dtype=np.float32)
    c.memcpy_htod(d, addr(vals), 64, s)
    cap = c.dlpack_export(d, d.ptr, [4, 4], None, 2, 32, 1, 2, 0)
    t = c.dlpack_import(cap)
    assert t.device == (2, 0) and t.ptr == d.ptr
    del t
    assert c.take_deferred_errors() == []
    check_torch(pool, s)
    print("device: ok")


def check_torch(pool, s):
    try:
        import torch
    except ImportError:
        print("torch not importable: interop skipped")
        return
    ts = torch.cuda.Stream()
    ext = c.Stream.external(ts.cuda_stream, 0)
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    # Our buffer, filled from torch memory with our copy on torch's stream.
    b = pool.allocate(4000, ext)
    c.memcpy_dtod(b, x.data_ptr(), 4000, ext)
    ext.synchronize()

    class Holder:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return c.dlpack_export(b, b.ptr, [1000], None, 2, 32, 1, 2, 0)

        def __dlpack_device__(self):
            return (2, 0)

    y = torch.from_dlpack(Holder())
    assert y.data_ptr() == b.ptr and torch.equal(y, x), "torch reads pool memory (same context)"
    t = c.dlpack_import(torch.utils.dlpack.to_dlpack(x))
    assert t.ptr == x.data_ptr() and t.device == (2, 0)
    del t, y
    print("torch interop: ok")
