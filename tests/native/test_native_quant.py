"""The quant family (native/src/quant): gp.quantize_fp8 / gp.dequantize_fp8 with the route
forced to native, bit for bit against the NumPy backend (pygpukit/backends/cpu/quant.py):
codes and scales on random data of every source dtype and granularity, ties, saturation at the
range's end, zero / NaN / inf groups, strided and transposed inputs, poisoned out= buffers.

The CPU-side tests check the Python adapter (pygpukit/backends/native/quant.py) without
a GPU: the extension is replaced by a NumPy model of its documented contract (quant.h: [rows,
cols] views with element strides, contiguous q / scale / y), so a wrong stride, pointer or group
fails here; the routing entries and signatures are checked too.
"""

from __future__ import annotations

import ctypes
import inspect
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import quant as nq
from pygpukit.routing.table import TABLE

gpu = pytest.mark.gpu
FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
FMAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ROUTE = "quantize_fp8:native,dequantize_fp8:native"

# (shape, granularity, block, group, scale shape): per tensor (one and several partials), per
# row, 1x128 / 1x64 blocks, 128x128 / 2x32 blocks; odd sizes throughout.
CASES = [
    ((1, 1), "tensor", 128, (1, 1), (1,)),
    ((7,), "tensor", 128, (1, 7), (1,)),
    ((33, 1500), "tensor", 128, (33, 1500), (1,)),
    ((129, 4097), "tensor", 128, (129, 4097), (1,)),
    ((2, 5, 300), "row", 128, (1, 300), (2, 5, 1)),
    ((7, 300), "block", 128, (1, 128), (7, 3)),
    ((2, 3, 100), "block", 64, (1, 64), (2, 3, 2)),
    ((131, 260), "block", (128, 128), (128, 128), (2, 3)),
    ((9, 70), "block", (2, 32), (2, 32), (5, 3)),
]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def _codes_equal(got: np.ndarray, ref: np.ndarray) -> None:
    """Bit-equal values (fp8 codes or results), except that a NaN only has to be a NaN: its
    sign and payload are not meaningful (a NaN group's codes come from x / NaN; the GPU's
    conversions give the canonical NaN, NumPy keeps payloads)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[ref.dtype.itemsize]
    nan = np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    gb, rb = np.ascontiguousarray(got).view(u), np.ascontiguousarray(ref).view(u)
    np.testing.assert_array_equal(gb[~nan], rb[~nan])


# ----- CPU: the adapter against a model of the extension -----------------------------------------


def _mem(addr: int, dt: Any, shape: tuple[int, ...], estrides: tuple[int, ...]) -> np.ndarray:
    """A writable NumPy view of host memory at addr with element strides."""
    dt = np.dtype(dt)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    buf = (ctypes.c_char * ((hi - lo + 1) * dt.itemsize)).from_address(addr + lo * dt.itemsize)
    base = np.frombuffer(buf, dtype=dt)[-lo:] if lo else np.frombuffer(buf, dtype=dt)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * dt.itemsize for s in estrides))


def _np(name: str) -> Any:
    return FP8.get(name) or NP.get(name) or np.dtype(name)


class FakeExtension:
    """quantize_fp8 / dequantize_fp8 as quant.h documents them, computed by the NumPy backend."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, int]]] = []

    def quantize_fp8(self, device, stream, src, dst, rows, cols, sr, sc, x, q, scale, gr, gc,
                     partial, n_partial):  # fmt: skip
        self.calls.append(("quantize_fp8", (gr, gc)))
        if gr >= rows and gc >= cols:
            assert partial and n_partial >= 1, "per tensor needs the partial-amax workspace"
        nr, nc = _cdiv(rows, gr), _cdiv(cols, gc)
        xv = _mem(x, _np(src), (rows, cols), (sr, sc))
        rq, rs = cpu.quantize_fp8(xv, dtype=dst, group=(gr, gc), scale_shape=(nr, nc))
        _mem(q, np.uint8, (rows, cols), (cols, 1))[...] = rq.view(np.uint8)
        _mem(scale, np.float32, (nr, nc), (nc, 1))[...] = rs

    def dequantize_fp8(self, device, stream, src, dst, rows, cols, sr, sc, q, scale, ssr, ssc,
                       gr, gc, y):  # fmt: skip
        self.calls.append(("dequantize_fp8", (gr, gc)))
        nr, nc = _cdiv(rows, gr), _cdiv(cols, gc)
        qv = _mem(q, np.uint8, (rows, cols), (sr, sc)).view(_np(src))  # as_strided lacks fp8
        sv = _mem(scale, np.float32, (nr, nc), (ssr, ssc))
        r = cpu.dequantize_fp8(qv, sv, out_dtype=_np(dst), group=(gr, gc))
        _mem(y, _np(dst), (rows, cols), (cols, 1))[...] = r


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeExtension:
    ext = FakeExtension()
    monkeypatch.setattr(nq, "extension", lambda: ext)
    return ext


def _h(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cpu")


def _layout(x: np.ndarray, layout: str) -> gp.GPUArray:
    if layout == "transposed":  # the last two dims swapped in memory
        return _h(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
        wide[..., ::2] = x
        return _h(wide)[..., ::2]
    if layout == "unmerged":  # every other middle row: leading dims that do not merge
        tall = np.zeros((x.shape[0], 2 * x.shape[1], *x.shape[2:]), x.dtype)
        tall[:, ::2] = x
        return _h(tall)[:, ::2]
    return _h(x)


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed", "unmerged"])
@pytest.mark.parametrize(("shape", "gran", "block", "group", "sshape"), CASES, ids=str)
def test_adapter_quantize(fake: FakeExtension, shape, gran, block, group, sshape, layout) -> None:
    if (layout == "transposed" and len(shape) < 2) or (layout == "unmerged" and len(shape) < 3):
        pytest.skip("layout needs more dims")
    rng = np.random.default_rng(len(fake.calls) + shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    q, s = nq.quantize_fp8(_layout(x, layout), dtype="float8_e5m2", group=group,
                           scale_shape=sshape)  # fmt: skip
    rq, rs = cpu.quantize_fp8(x, dtype="float8_e5m2", group=group, scale_shape=sshape)
    assert fake.calls[-1] == ("quantize_fp8", group)
    assert q.shape == shape and q.is_contiguous() and s.shape == sshape
    np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
    np.testing.assert_array_equal(s.to_numpy(), rs)


@pytest.mark.parametrize("out_layout", ["none", "contiguous", "strided"])
@pytest.mark.parametrize(("shape", "gran", "block", "group", "sshape"), CASES, ids=str)
def test_adapter_dequantize(fake: FakeExtension, shape, gran, block, group, sshape, out_layout):
    rng = np.random.default_rng(shape[-1])
    q = (rng.standard_normal(shape) * 20).astype(np.float32).astype(FP8["float8_e4m3fn"])
    s = (rng.random(sshape) * 4 + 0.01).astype(np.float32)
    want = cpu.dequantize_fp8(q, s, out_dtype=np.float16, group=group)
    st = _h(s.T.copy()).T if s.ndim == 2 else _h(s)  # a transposed scale is read in place
    out = None if out_layout == "none" else _layout(np.full(shape, np.nan, np.float16), out_layout)
    r = nq.dequantize_fp8(_layout(q, "strided"), st, out_dtype="float16", group=group, out=out)
    assert out is None or r is out
    assert fake.calls[-1] == ("dequantize_fp8", group)
    np.testing.assert_array_equal(r.to_numpy(), want)


def test_routes_and_signatures() -> None:
    for op in ("quantize_fp8", "dequantize_fp8"):
        names = [c.backend for c in TABLE[op].candidates]
        assert names == ["triton", "native", "cpu"], names  # Triton stays the default
        assert TABLE[op].family == "quant"
        assert TABLE[op].candidates[1].dtypes == TABLE[op].candidates[0].dtypes
    tq = pytest.importorskip("pygpukit.backends.triton_kernels.quant")
    for name in ("quantize_fp8", "dequantize_fp8"):
        assert inspect.signature(getattr(nq, name)) == inspect.signature(getattr(tq, name))


def test_extension_rechecks_arguments() -> None:
    ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")
    if "quant" not in ext.families:
        pytest.skip("this build lacks the quant family")
    with pytest.raises(ValueError, match="at least one element"):
        ext.quantize_fp8(0, 0, "float32", "float8_e4m3fn", 0, 5, 5, 1, 0, 0, 0, 1, 1, 0, 0)
    with pytest.raises(ValueError, match="unsupported dtype float64"):
        ext.quantize_fp8(0, 0, "float64", "float8_e4m3fn", 1, 5, 5, 1, 0, 0, 0, 1, 1, 0, 0)
    with pytest.raises(ValueError, match="group sizes"):
        ext.dequantize_fp8(0, 0, "float8_e5m2", "float32", 1, 5, 5, 1, 0, 0, 1, 1, 0, 1, 0)


# ----- GPU: the kernels through the public ops ---------------------------------------------------


def _up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


@pytest.fixture
def native() -> Any:
    with gp.route(ROUTE):
        before = gp.routing.stats()
        yield
        after = gp.routing.stats()
        for op in ("quantize_fp8", "dequantize_fp8"):
            n0 = before.get(op, {}).get("native", 0)
            assert after.get(op, {}).get("native", 0) >= n0  # never another backend
            assert after.get(op, {}).get("triton", 0) == before.get(op, {}).get("triton", 0)


def _quant_ref(x: np.ndarray, dtype: str, group: tuple, sshape: tuple) -> tuple:
    return cpu.quantize_fp8(x, dtype=dtype, group=group, scale_shape=sshape)


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("src", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(("shape", "gran", "block", "group", "sshape"), CASES, ids=str)
def test_quantize_bit_exact(src, dtype, shape, gran, block, group, sshape) -> None:
    rng = np.random.default_rng(len(src) + 11 * group[1] + shape[-1])
    for mag in (1e-4, 1.0, 300.0):
        x = (rng.standard_normal(shape) * mag).astype(np.float32)
        x.reshape(-1, shape[-1])[:, 1:4] = 0.0
        x = x.astype(NP[src])
        q, s = gp.quantize_fp8(_up(x), dtype, granularity=gran, block=block)
        rq, rs = _quant_ref(x, dtype, group, sshape)
        assert q.dtype.name == dtype and q.shape == shape and s.shape == sshape
        np.testing.assert_array_equal(s.to_numpy(), rs)
        np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_ties_and_range_end(dtype: str) -> None:
    """Quotients exactly halfway between fp8 values round to even (all of them, both signs,
    subnormals included); the largest element lands on fp8_max even when amax / fp8_max rounds
    down (the clamp), in every granularity."""
    fmax = np.float32(FMAX[dtype])
    grid = np.arange(256, dtype=np.uint8).view(FP8[dtype]).astype(np.float32)
    grid = np.unique(grid[np.isfinite(grid) & (grid >= 0) & (grid <= fmax)])
    mids = ((grid[:-1] + grid[1:]) / 2).astype(np.float32)  # exact in fp32: ties
    x = np.concatenate([mids, -mids, [0.0, fmax]]).astype(np.float32)[None, :]
    for amax in (fmax, np.float32(1.2345678) * fmax, np.float32(3.0) * fmax):
        xs = x.copy()
        xs[0, -1] = amax
        xs = np.concatenate([xs, -xs])  # 2 rows: the last element of row 1 is -amax
        for gran, group, sshape in (("tensor", (2, xs.shape[1]), (1,)),
                                    ("row", (1, xs.shape[1]), (2, 1))):  # fmt: skip
            q, s = gp.quantize_fp8(_up(xs), dtype, granularity=gran)
            rq, rs = _quant_ref(xs, dtype, group, sshape)
            np.testing.assert_array_equal(s.to_numpy(), rs)
            np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
            qf = q.to_numpy().astype(np.float32)
            assert qf[0, -1] == fmax and qf[1, -1] == -fmax


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_zero_nan_inf_groups(dtype: str) -> None:
    """A group of zeros (and -0.0) gets scale 1.0 and zero codes (signs kept); a tiny group's
    amax / fp8_max underflowing to 0 gets scale 1.0 too; a NaN in a group makes its scale NaN
    (np.max propagates NaN) and its codes NaN; an inf makes its scale inf, its finite elements
    +-0 and the inf itself NaN (inf / inf); the other groups are untouched."""
    x = np.ones((6, 70), np.float32) * np.linspace(-3, 3, 70, dtype=np.float32)
    x[0] = 0.0
    x[0, 5] = -0.0
    x[1] = 0.0
    x[1, 3] = np.float32(1e-44)  # a subnormal: 1e-44 / fp8_max underflows to 0
    x[2, 10] = np.nan
    x[3, 20] = np.inf
    x[4, 33] = -np.inf
    for gran, block, group, sshape in (
        ("row", 128, (1, 70), (6, 1)),
        ("block", 32, (1, 32), (6, 3)),
        ("block", (2, 32), (2, 32), (3, 3)),
        ("tensor", 128, (6, 70), (1,)),
    ):
        q, s = gp.quantize_fp8(_up(x), dtype, granularity=gran, block=block)
        rq, rs = _quant_ref(x, dtype, group, sshape)
        np.testing.assert_array_equal(s.to_numpy(), rs)  # NaN == NaN here
        _codes_equal(q.to_numpy(), rq)
    q, s = gp.quantize_fp8(_up(x), dtype, granularity="row")
    sn = s.to_numpy().reshape(-1)
    assert sn[0] == 1.0 and sn[1] == 1.0 and np.isnan(sn[2]) and np.isinf(sn[3])
    assert np.all(q.to_numpy()[0].astype(np.float32) == 0) and q.to_numpy()[1, 3] == 0


@gpu
@pytest.mark.usefixtures("native")
def test_quantize_strided_and_transposed_inputs() -> None:
    rng = np.random.default_rng(5)
    base = (rng.standard_normal((40, 66)) * 7).astype(np.float32)
    wide = np.zeros((40, 132), np.float32)
    wide[:, ::2] = base
    for gran, block, group, sshape in (
        ("row", 128, (1, 66), (40, 1)),
        ("block", 32, (1, 32), (40, 3)),
        ("block", (8, 32), (8, 32), (5, 3)),
        ("tensor", 128, (40, 66), (1,)),
    ):
        rq, rs = _quant_ref(base, "float8_e4m3fn", group, sshape)
        for v in (_up(wide)[:, ::2], _up(base.T).T, _up(base[::-1])[::-1]):
            q, s = gp.quantize_fp8(v, granularity=gran, block=block)
            np.testing.assert_array_equal(s.to_numpy(), rs)
            np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
    base3 = (rng.standard_normal((4, 20, 66)) * 7).astype(np.float32)
    q, s = gp.quantize_fp8(_up(base3)[:, ::2], granularity="row")  # leading dims do not merge
    rq, rs = _quant_ref(base3[:, ::2], "float8_e4m3fn", (1, 66), (4, 10, 1))
    np.testing.assert_array_equal(s.to_numpy(), rs)
    np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))


@gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("out_dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(("shape", "gran", "block", "group", "sshape"), CASES, ids=str)
def test_dequantize(out_dtype, dtype, shape, gran, block, group, sshape) -> None:
    rng = np.random.default_rng(group[1] + len(out_dtype) + shape[-1])
    q = (rng.standard_normal(shape) * 20).astype(np.float32).astype(FP8[dtype])
    specials = np.float32([np.nan, 0.0, -0.0]).astype(FP8[dtype])
    q.reshape(-1)[:3] = specials[: min(3, q.size)]  # a (1, 1) input takes the NaN only
    s = (rng.random(sshape) * 4 + 0.01).astype(np.float32)
    s.reshape(-1)[-1] = np.float32(3e38)  # products beyond half range: inf, as the reference
    want = cpu.dequantize_fp8(q, s, out_dtype=NP[out_dtype], group=group)
    out = gp.full(shape, float("nan"), dtype=out_dtype, device="cuda:0")
    r = gp.dequantize_fp8(_up(q), _up(s), out_dtype=out_dtype, block=block, out=out)
    assert r is out
    _codes_equal(r.to_numpy(), want)
    r = gp.dequantize_fp8(_up(q), _up(s), out_dtype=out_dtype, block=block)
    assert r.is_contiguous() and r.shape == shape
    _codes_equal(r.to_numpy(), want)


@gpu
@pytest.mark.usefixtures("native")
def test_dequantize_strided_operands_and_out() -> None:
    rng = np.random.default_rng(9)
    q = (rng.standard_normal((12, 200)) * 20).astype(np.float32).astype(FP8["float8_e4m3fn"])
    s = (rng.random((12, 2)) + 0.5).astype(np.float32)
    want = cpu.dequantize_fp8(q, s, out_dtype=ml_dtypes.bfloat16, group=(1, 128))
    wide = gp.full((12, 400), float("nan"), dtype="bfloat16", device="cuda:0")
    out = wide[:, ::2]
    r = gp.dequantize_fp8(_up(q.T).T, _up(s.T).T, block=128, out=out)
    assert r is out
    _codes_equal(r.to_numpy(), want)
    assert np.all(np.isnan(wide.to_numpy()[:, 1::2].astype(np.float32)))  # gaps untouched


@gpu
@pytest.mark.usefixtures("native")
def test_round_trip_and_routing() -> None:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 256)) * 3).astype(np.float32)
    before = gp.routing.stats().get("quantize_fp8", {}).get("native", 0)
    q, s = gp.quantize_fp8(_up(x), granularity="block", block=128)
    d = gp.dequantize_fp8(q, s, out_dtype="float32", block=128).to_numpy()
    assert gp.routing.stats()["quantize_fp8"]["native"] == before + 1
    rq, rs = cpu.quantize_fp8(x, dtype="float8_e4m3fn", group=(1, 128), scale_shape=(6, 2))
    np.testing.assert_array_equal(d, cpu.dequantize_fp8(rq, rs, out_dtype=np.float32,
                                                        group=(1, 128)))  # fmt: skip
