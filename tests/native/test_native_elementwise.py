"""Native twins of the elementwise ops (add ... pow, comparisons, where, clamp) on the GPU,
through the public ops with every route forced to native, against float64 references and the
NumPy backend.

add/sub/mul/div/maximum/minimum are single IEEE operations in float32 (float64 for float64)
rounded once, exactly what the NumPy backend computes: those results must be bit-equal to it.
pow uses CUDA's powf (<= 2 ulp): docs/design.md's bounds against float64.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import elementwise as ew

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
FLOATS = ["float32", "float16", "bfloat16", "float64"]
EXACT = ["add", "sub", "mul", "div", "maximum", "minimum"]
REF = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "pow": np.power,
}
# (a shape, b shape): equal, broadcast row, broadcast column, size 1, primes, 3-D broadcast.
SHAPES = [
    ((4097,), (4097,)),
    ((7, 33), (33,)),
    ((7, 33), (7, 1)),
    ((1,), (1,)),
    ((3, 5, 7), (5, 1)),
    ((2, 131, 257), (131, 1)),
]


@pytest.fixture(autouse=True)
def _native() -> Iterator[None]:
    with gp.route("*:native"):
        yield


def np_dtype(name: str) -> Any:
    return gp.as_dtype(name).np_dtype


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.array(x, order="C"), device=DEV)


def view(x: np.ndarray, layout: str) -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "strided" and x.ndim:
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return up(wide)[..., ::2]
    return up(x)


def poisoned(shape: tuple[int, ...], dtype: str, strided: bool = False) -> gp.GPUArray:
    dt = gp.as_dtype(dtype)
    full = (*shape[:-1], 2 * shape[-1]) if strided else shape
    if dt.is_floating:
        buf = gp.full(full, float("nan"), dtype=dt, device=DEV)
    elif dt.kind == "b":
        buf = gp.full(full, True, dtype=dt, device=DEV)
    else:
        buf = gp.full(full, int(np.iinfo(dt.np_dtype).min), dtype=dt, device=DEV)
    return buf[..., ::2] if strided else buf


def same(got: gp.GPUArray | np.ndarray, ref: np.ndarray, what: str = "") -> None:
    """Bit-equal values (any NaN equals any NaN; +0 and -0 are equal)."""
    g = got.to_numpy() if isinstance(got, gp.GPUArray) else np.asarray(got)
    r = np.asarray(ref)
    assert g.dtype == r.dtype and g.shape == r.shape, (what, g.dtype, r.dtype, g.shape, r.shape)
    if g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, r, err_msg=what)
        return
    g64, r64 = g.astype(np.float64), r.astype(np.float64)
    bad = ~((g64 == r64) | (np.isnan(g64) & np.isnan(r64)))
    assert not bad.any(), f"{what}: {bad.sum()} differ, first at {np.argwhere(bad)[:4].tolist()}"


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", [*EXACT, "pow"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_arith(dtype: str, op: str, shapes: tuple, layout: str) -> None:
    rng = np.random.default_rng(seed("narith", dtype, op, shapes, layout))
    a = rand(rng, shapes[0], dtype, positive=op == "pow")
    b = rand(rng, shapes[1], dtype, scale=0.5 if op == "pow" else 1.0, positive=op == "div")
    out = poisoned(np.broadcast_shapes(a.shape, b.shape), dtype)
    r = getattr(gp, op)(view(a, layout), view(b, layout), out=out)
    assert r is out and r.dtype is gp.as_dtype(dtype)
    assert_close(r, REF[op](as64(a), as64(b)), dtype, name=op)
    if op in EXACT:
        same(r, getattr(cpu, op)(a, b, out_dtype=np_dtype(dtype)), op)


def test_routes_to_native() -> None:
    a = up(np.ones((4, 4), np.float32))
    assert gp.routing.explain("add", a, a).backend == "native"
    gp.routing.reset_stats()
    gp.add(a, a)
    gp.eq(a, a)
    assert gp.routing.stats()["add"] == {"native": 1}
    assert gp.routing.stats()["eq"] == {"native": 1}


@pytest.mark.parametrize("op", EXACT)
def test_strided_out_and_aliasing(op: str) -> None:
    rng = np.random.default_rng(seed("nout", op))
    a, b = rand(rng, (5, 4097), "bfloat16"), rand(rng, (5, 1), "bfloat16", positive=True)
    out = poisoned((5, 4097), "bfloat16", strided=True)
    assert getattr(gp, op)(view(a, "transposed"), up(b), out=out) is out
    same(out, getattr(cpu, op)(a, b, out_dtype=np_dtype("bfloat16")), op)
    x = up(a)
    getattr(gp, op)(x, x, out=x)  # in place, aliasing both inputs
    same(x, getattr(cpu, op)(a, a, out_dtype=np_dtype("bfloat16")), f"{op} in place")


def test_scalars_round_once() -> None:
    # x_fp16 + 0.1 computes x + float32(0.1) in float32 and rounds once (torch opmath).
    a = np.arange(-40, 40, dtype=np.float16) / np.float16(8)
    same(gp.add(up(a), 0.1), (a.astype(np.float32) + np.float32(0.1)).astype(np.float16))
    same(gp.sub(2.5, up(a)), (np.float32(2.5) - a.astype(np.float32)).astype(np.float16))
    f64 = rand(np.random.default_rng(3), 33, "float64")
    for v in (0.1, 1e-300, -7.123456789012345):  # 53 bits travel exactly
        same(gp.add(up(f64), v), f64 + v)
    i = np.arange(-5, 5, dtype=np.int32)
    same(ew.add(up(i), 2**40 + 3, out_dtype=np.int64), i.astype(np.int64) + 2**40 + 3)
    same(gp.div(up(i), 2), (i.astype(np.float32) / np.float32(2)))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum", "pow"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_integers_exact(dtype: str, op: str) -> None:
    rng = np.random.default_rng(seed("nint", op, dtype))
    info = np.iinfo(np_dtype(dtype))
    a = rng.integers(info.min, info.max, size=(7, 33), endpoint=True).astype(np_dtype(dtype))
    b = rng.integers(0, 6, size=33).astype(np_dtype(dtype)) if op == "pow" else rng.integers(
        info.min, info.max, size=33, endpoint=True).astype(np_dtype(dtype))  # fmt: skip
    r = getattr(gp, op)(view(a, "strided"), up(b))  # wraps around like NumPy
    same(r, getattr(cpu, op)(a, b, out_dtype=np_dtype(dtype)), f"{op} {dtype}")


def test_integer_pow_negative_exponent() -> None:
    # The reference raises; the kernel gives torch's values (documented in the adapter).
    a = np.array([1, -1, -1, 2, 0, 5], np.int32)
    e = np.array([-3, -3, -2, -1, 2, 0], np.int32)
    same(ew.pow(up(a), up(e), out_dtype=np.int32), np.array([1, -1, 1, 0, 0, 1], np.int32))


def test_bool_arithmetic_is_logical() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random((7, 9)) < 0.5, rng.random((7, 9)) < 0.5
    for op in ("add", "mul", "maximum", "minimum"):
        same(getattr(gp, op)(up(a), up(b)), getattr(cpu, op)(a, b, out_dtype=np.bool_), op)
    same(ew.sub(up(a), up(b), out_dtype=np.bool_), a.astype(np.int32) - b != 0)


def test_mixed_dtypes() -> None:
    rng = np.random.default_rng(6)
    i32, h = rand(rng, (7, 33), "int32", low=-3000, high=3000), rand(rng, 33, "float16")
    r = gp.add(up(i32), up(h))  # float16: both to float32, one rounding
    assert r.dtype is gp.float16
    same(r, cpu.add(i32, h, out_dtype=np.float16))
    i8 = rand(rng, 33, "int8")
    same(gp.mul(up(h), up(i8)), cpu.mul(h, i8, out_dtype=np.float16))
    f, bf = rand(rng, 33, "float32"), rand(rng, (7, 33), "bfloat16")
    same(gp.add(up(bf), up(f)), cpu.add(bf, f, out_dtype=np.float32))
    same(gp.mul(up(h), up(bf)), cpu.mul(h, bf, out_dtype=np.float32))
    same(ew.add(up(f), up(f), out_dtype=np.float16), cpu.add(f, f, out_dtype=np.float16))


def test_nan_and_signed_zero() -> None:
    a = np.array([1.0, np.nan, 3.0, -np.inf, 0.0, -0.0], np.float32)
    b = np.array([np.nan, 2.0, 1.0, 1.0, -0.0, 0.0], np.float32)
    for op in ("maximum", "minimum"):
        same(getattr(gp, op)(up(a), up(b)), getattr(cpu, op)(a, b, out_dtype=np.float32), op)
    same(gp.div(up(a), 0.0), cpu.div(a, np.float32(0.0), out_dtype=np.float32))


def test_many_dims_and_large() -> None:
    rng = np.random.default_rng(7)
    # b broadcasts along every other dim: 7 collapsed dims, split on the host.
    a = rand(rng, (2, 3, 2, 3, 2, 3, 4), "float32")
    b = rand(rng, (1, 3, 1, 3, 1, 3, 1), "float32")
    out = poisoned(a.shape, "float32")
    gp.add(view(a, "strided"), up(b), out=out)
    same(out, cpu.add(a, b, out_dtype=np.float32))
    n = (1 << 22) + 7
    x, y = rand(rng, n, "bfloat16"), rand(rng, n, "bfloat16")
    same(gp.mul(up(x), up(y)), cpu.mul(x, y, out_dtype=np_dtype("bfloat16")))
    # one element past a pool block: the unaligned (scalar) path of the flat kernel
    gx = up(np.concatenate([np.zeros(1, x.dtype), x]))[1:]
    same(gp.add(gx, up(y)), cpu.add(x, y, out_dtype=np_dtype("bfloat16")))


CMP = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("op", CMP)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int32", "uint8", "bool"])
def test_compare(dtype: str, op: str) -> None:
    rng = np.random.default_rng(seed("ncmp", op, dtype))
    a, b = rand(rng, (33, 7), dtype, low=0, high=3), rand(rng, 7, dtype, low=0, high=3)
    if dtype in FLOATS:
        a[::2] = b  # ties
        a[1, 1] = np.nan
    out = poisoned((33, 7), "bool")
    r = getattr(gp, op)(view(a, "transposed"), up(b), out=out)
    assert r is out and r.dtype is gp.bool_
    same(r, getattr(cpu, op)(a, b), op)
    if dtype in FLOATS:
        same(getattr(gp, op)(up(a), 0.5), getattr(cpu, op)(a, np.asarray(0.5, a.dtype)), op)
    i = rand(rng, 7, "int32", low=-3, high=3)
    same(getattr(gp, op)(up(a), up(i)), getattr(cpu, op)(a, i), f"{op} vs int32")


def test_where() -> None:
    rng = np.random.default_rng(8)
    for dtype in (*FLOATS, "int8", "int64", "bool"):
        cond = rng.random((7, 33)) < 0.5
        a, b = rand(rng, (7, 33), dtype), rand(rng, 33, dtype)
        out = poisoned((7, 33), dtype)
        r = gp.where(view(cond, "transposed"), view(a, "strided"), up(b), out=out)
        assert r is out
        same(r, cpu.where(cond, a, b), dtype)
    cond = rng.random((7, 33)) < 0.5
    h = rand(rng, (7, 33), "float16")
    same(gp.where(up(cond), up(h), 0.1), cpu.where(cond, h, np.float16(0.1)))
    want = np.where(cond[:, :1], 1.5, -2.0).astype(np.float32)
    same(gp.where(up(cond[:, :1]), 1.5, -2), want)
    ai, af = rand(rng, (7, 33), "int32"), rand(rng, 33, "float32")
    same(gp.where(up(cond), up(ai), up(af)), cpu.where(cond, ai, af))


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("dtype", [*FLOATS, "int32", "uint8"])
def test_clamp(dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed("nclamp", dtype, layout))
    x = rand(rng, (9, 33), dtype, scale=2.0, low=0, high=40)
    lo, hi = rand(rng, 33, dtype, low=0, high=10), rand(rng, (9, 1), dtype, low=20, high=30)
    if dtype in FLOATS:
        x[0, :3] = [np.nan, np.inf, -np.inf]
    ct = np.float32 if dtype in ("float16", "bfloat16") else np_dtype(dtype)
    for mn, mx in ((1, 30), (None, 30), (1, None), ("lo", "hi"), ("lo", 25), (30, 1)):
        dmn = up(lo) if mn == "lo" else mn
        dmx = up(hi) if mx == "hi" else mx
        hmn = lo if mn == "lo" else None if mn is None else np.asarray(mn, ct)
        hmx = hi if mx == "hi" else None if mx is None else np.asarray(mx, ct)
        out = poisoned((9, 33), dtype)
        gp.clamp(view(x, layout), dmn, dmx, out=out)
        same(out, cpu.clamp(x, hmn, hmx), f"{mn} {mx}")
