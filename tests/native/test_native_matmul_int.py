"""Integer gp.matmul on the GPU (native/src/matmul_int, reached through the native backend's
matmul): exactly np.matmul, whose integer products and sums wrap around in the result dtype.

The reference is computed twice and must agree: np.matmul itself (what the NumPy backend runs)
and an independent one, the product in uint64 (wraparound mod 2^64 is defined there) truncated
to the result dtype. Data spans each dtype's whole range, so sums overflow and wrap. Shapes: odd
sizes 1, 7, 129 (partial 64 x 64 tiles and 16-deep K steps), batches with broadcasting,
transposed / strided / reversed views, batch dims that cannot be stepped with one stride, the
1-D rules, mixed integer dtypes (cast first), poisoned out= buffers.

The CPU-side tests check the Python adapter (pygpukit/backends/native/matmul_int.py)
against a NumPy model of the extension's contract (matmul_int.h), and the routing entry.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.backends.native import matmul_int as nmi
from pygpukit.routing.table import TABLE

gpu = pytest.mark.gpu
INTS = ["int8", "uint8", "int16", "int32", "int64"]
SIZES = [1, 7, 129]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Integers over the dtype's whole range (sums wrap)."""
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def _ref(a: np.ndarray, b: np.ndarray, dtype: str | None = None) -> np.ndarray:
    """np.matmul, checked against the uint64 product truncated to the result dtype."""
    rd = np.dtype(dtype) if dtype else np.result_type(a.dtype, b.dtype)
    want = np.matmul(a.astype(rd), b.astype(rd))
    with np.errstate(over="ignore"):
        wrapped = np.matmul(a.astype(rd).astype(np.uint64), b.astype(rd).astype(np.uint64))
    np.testing.assert_array_equal(want, wrapped.astype(rd))
    return want


# ----- CPU: the adapter against a model of the extension -----------------------------------------


def _mem(addr: int, dt: Any, shape: tuple[int, ...], estrides: tuple[int, ...]) -> np.ndarray:
    dt = np.dtype(dt)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    buf = (ctypes.c_char * ((hi - lo + 1) * dt.itemsize)).from_address(addr + lo * dt.itemsize)
    base = np.frombuffer(buf, dtype=dt)[-lo:] if lo else np.frombuffer(buf, dtype=dt)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * dt.itemsize for s in estrides))


class FakeExtension:
    """matmul_int as matmul_int.h documents it, computed in uint64 over host memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, int]] = []

    def matmul_int(self, device, stream, dtype, batch, m, n, k, a, sab, sam, sak, b, sbb, sbk,
                   sbn, d):  # fmt: skip
        assert min(batch, m, n, k) >= 1
        self.calls.append((batch, m, n, k))
        dt = np.dtype(dtype)
        av = _mem(a, dt, (batch, m, k), (sab, sam, sak))
        bv = _mem(b, dt, (batch, k, n), (sbb, sbk, sbn))
        with np.errstate(over="ignore"):
            r = np.matmul(av.astype(np.uint64), bv.astype(np.uint64))
        _mem(d, dt, (batch, m, n), (m * n, n, 1))[...] = r.astype(dt)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeExtension:
    ext = FakeExtension()
    monkeypatch.setattr(nmi, "extension", lambda: ext)
    return ext


def _h(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cpu")


def _views(x: np.ndarray, up: Any) -> list[gp.GPUArray]:
    """x contiguous, transposed in memory, strided along the last dim, reversed along the first."""
    out = [up(x)]
    if x.ndim >= 2:
        out.append(up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2))
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
    wide[..., ::2] = x
    out.append(up(wide)[..., ::2])
    out.append(up(x[::-1])[::-1])
    return out


# (a shape, b shape): 2-D, batched, broadcast batches, 2-D under batched (and reverse), vectors.
SHAPES = [
    ((7, 129), (129, 1)),
    ((1, 7), (7, 129)),
    ((3, 7, 5), (3, 5, 9)),
    ((2, 1, 7, 5), (3, 5, 9)),
    ((4, 7, 5), (5, 3)),
    ((7, 5), (2, 5, 3)),
    ((9,), (9,)),
    ((9,), (9, 4)),
    ((4, 9), (9,)),
    ((2, 3, 9), (9,)),
    ((9,), (2, 9, 4)),
]


@pytest.mark.parametrize(("sa", "sb"), SHAPES, ids=str)
def test_adapter_layouts(fake: FakeExtension, sa: tuple, sb: tuple) -> None:
    rng = np.random.default_rng(len(sa) * 10 + len(sb) + sa[-1])
    a, b = _rand(rng, sa, "int32"), _rand(rng, sb, "int32")
    want = _ref(a, b)
    for va, vb in itertools.product(_views(a, _h), _views(b, _h)):
        r = nmi.matmul(va, vb)
        assert r.dtype is gp.int32 and r.shape == want.shape
        np.testing.assert_array_equal(r.to_numpy(), want)


def test_adapter_batch_plans(fake: FakeExtension) -> None:
    rng = np.random.default_rng(3)
    # Batch dims permuted in memory: no single batch stride, so the outer dim loops on the host.
    a = _rand(rng, (3, 4, 6, 5), "int16")
    b = _rand(rng, (3, 4, 5, 2), "int16")
    va = _h(np.ascontiguousarray(a.transpose(1, 0, 2, 3))).permute(1, 0, 2, 3)
    fake.calls.clear()
    r = nmi.matmul(va, _h(b))
    np.testing.assert_array_equal(r.to_numpy(), _ref(a, b))
    assert fake.calls == [(4, 6, 2, 5)] * 3
    # Uniform batches: one launch over all of them.
    fake.calls.clear()
    np.testing.assert_array_equal(nmi.matmul(_h(a), _h(b)).to_numpy(), _ref(a, b))
    assert fake.calls == [(12, 6, 2, 5)]


def test_adapter_dtypes_out_and_empty(fake: FakeExtension) -> None:
    rng = np.random.default_rng(4)
    a, b = _rand(rng, (5, 7), "int8"), _rand(rng, (7, 3), "uint8")
    want = _ref(a, b)  # int8 x uint8 -> int16
    assert want.dtype == np.int16
    r = nmi.matmul(_h(a), _h(b), out_dtype="int16")
    np.testing.assert_array_equal(r.to_numpy(), want)
    wide = _h(np.full((5, 6), 77, np.int16))
    out = wide[:, ::2]
    assert nmi.matmul(_h(a), _h(b), out=out, out_dtype="int16") is out
    np.testing.assert_array_equal(out.to_numpy(), want)
    assert np.all(wide.to_numpy()[:, 1::2] == 77)
    calls = len(fake.calls)
    z = nmi.matmul(_h(np.zeros((3, 0), np.int64)), _h(np.zeros((0, 4), np.int64)))
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((3, 4), np.int64))
    assert nmi.matmul(_h(np.zeros((0, 2), np.int8)), _h(a[:2])).shape == (0, 7)
    assert len(fake.calls) == calls  # empty products launch nothing
    with pytest.raises(TypeError, match="float32"):
        nmi.matmul(_h(a), _h(b), out_dtype="float32")


def test_route_admits_integers() -> None:
    native = [c for c in TABLE["matmul"].candidates if c.backend == "native"]
    assert native and {"int8", "uint8", "int16", "int32", "int64"} <= native[0].dtypes
    lin = next(c for c in TABLE["linear"].candidates if c.backend == "native")
    assert "int32" not in lin.dtypes


def test_extension_rechecks_arguments() -> None:
    ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")
    if "matmul_int" not in ext.families:
        pytest.skip("this build lacks the matmul_int family")
    with pytest.raises(ValueError, match="must be >= 1"):
        ext.matmul_int(0, 0, "int32", 1, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0)
    with pytest.raises(ValueError, match="unsupported dtype float32"):
        ext.matmul_int(0, 0, "float32", 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0)


# ----- GPU: the kernel through gp.matmul ---------------------------------------------------------


def _up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


@pytest.fixture
def native() -> Any:
    with gp.route(matmul="native"):
        yield


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize(("m", "k", "n"), list(itertools.product(SIZES, repeat=3)), ids=str)
def test_matmul_int_exact(dtype: str, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 10007 + k * 101 + n + len(dtype))
    a, b = _rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)
    want = _ref(a, b)
    r = gp.matmul(_up(a), _up(b))
    assert r.dtype.name == dtype and r.shape == (m, n)
    np.testing.assert_array_equal(r.to_numpy(), want)
    np.testing.assert_array_equal((_up(a) @ _up(b)).to_numpy(), want)


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize(("sa", "sb"), SHAPES, ids=str)
def test_matmul_int_layouts_and_batches(dtype: str, sa: tuple, sb: tuple) -> None:
    rng = np.random.default_rng(len(sa) * 10 + len(sb) + sa[-1] + len(dtype))
    a, b = _rand(rng, sa, dtype), _rand(rng, sb, dtype)
    want = _ref(a, b)
    for va, vb in itertools.product(_views(a, _up), _views(b, _up)):
        r = gp.matmul(va, vb)
        assert r.shape == want.shape
        np.testing.assert_array_equal(r.to_numpy(), want)


@gpu
@pytest.mark.usefixtures("native")
def test_matmul_int_large_batches_and_tiles() -> None:
    rng = np.random.default_rng(8)
    # More batches than a grid's y extent (65535): the kernel loops over them.
    a, b = _rand(rng, (70001, 2, 3), "int32"), _rand(rng, (70001, 3, 2), "int32")
    np.testing.assert_array_equal(gp.matmul(_up(a), _up(b)).to_numpy(), _ref(a, b))
    # Many tiles and a long K; batch dims permuted in memory (a host loop over the outer dim).
    a, b = _rand(rng, (300, 1000), "int64"), _rand(rng, (1000, 257), "int64")
    np.testing.assert_array_equal(gp.matmul(_up(a), _up(b)).to_numpy(), _ref(a, b))
    a, b = _rand(rng, (3, 4, 65, 17), "uint8"), _rand(rng, (3, 4, 17, 66), "uint8")
    va = _up(np.ascontiguousarray(a.transpose(1, 0, 2, 3))).permute(1, 0, 2, 3)
    np.testing.assert_array_equal(gp.matmul(va, _up(b)).to_numpy(), _ref(a, b))


@gpu
@pytest.mark.usefixtures("native")
def test_matmul_int_mixed_dtypes_out_and_empty() -> None:
    rng = np.random.default_rng(6)
    a, b = _rand(rng, (7, 129), "int8"), _rand(rng, (129, 9), "uint8")
    want = _ref(a, b)  # int16, NumPy's promotion of int8 and uint8
    r = gp.matmul(_up(a), _up(b))
    assert r.dtype is gp.int16
    np.testing.assert_array_equal(r.to_numpy(), want)
    a32 = _rand(rng, (7, 129), "int32")
    np.testing.assert_array_equal(gp.matmul(_up(a32), _up(b)).to_numpy(), _ref(a32, b))
    wide = gp.full((7, 18), 12345, dtype="int16", device="cuda:0")
    out = wide[:, ::2]
    assert gp.matmul(_up(a), _up(b), out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), want)
    assert np.all(wide.to_numpy()[:, 1::2] == 12345)
    out = gp.full((7, 9), 12345, dtype="int16", device="cuda:0")
    assert gp.matmul(_up(a), _up(b), out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), want)
    z = gp.matmul(_up(np.zeros((3, 0), np.int32)), _up(np.zeros((0, 4), np.int32)))
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((3, 4), np.int32))
    # An integer with a float operand promotes to the float and runs on cuBLASLt.
    f = rng.standard_normal((129, 9)).astype(np.float32)
    got = gp.matmul(_up(a32 % 100), _up(f)).to_numpy()
    np.testing.assert_allclose(got, (a32 % 100).astype(np.float64) @ f, rtol=1e-5, atol=1e-3)


@gpu
def test_matmul_int_default_route() -> None:
    """Without a forced route, integer products on a GPU find the native backend (the
    BackendUnavailableError)."""
    i = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    np.testing.assert_array_equal(gp.matmul(_up(i), _up(i.T)).to_numpy(), i @ i.T)
    assert gp.routing.explain("matmul", _up(i), _up(i.T)).backend == "native"
