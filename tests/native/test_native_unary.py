"""Native twins of the unary ops (neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh) on the GPU,
through the public ops with every route forced to native, against float64 references.

neg/abs are exact; sqrt and rsqrt are correctly rounded (sqrt.rn, div.rn), so in float32 they
equal NumPy's float32 results bit for bit; the transcendentals are CUDA's accurate functions
(<= 2 ulp in float32), within docs/design.md's bounds.
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
from pygpukit.backends.native import unary as un

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
FLOATS = ["float32", "float16", "bfloat16", "float64"]
OPS = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh"]
POSITIVE = {"log", "sqrt", "rsqrt"}
REF = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1 / np.sqrt(v),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
}


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
    full = (*shape[:-1], 2 * shape[-1]) if strided else shape
    buf = gp.full(full, float("nan"), dtype=dtype, device=DEV)
    return buf[..., ::2] if strided else buf


def same(got: gp.GPUArray, ref: np.ndarray, what: str = "") -> None:
    g, r = got.to_numpy(), np.asarray(ref)
    assert g.dtype == r.dtype and g.shape == r.shape, (what, g.dtype, r.dtype)
    if g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, r, err_msg=what)
        return
    g64, r64 = g.astype(np.float64), r.astype(np.float64)
    ok = (g64 == r64) & (np.signbit(g64) == np.signbit(r64)) | (np.isnan(g64) & np.isnan(r64))
    assert ok.all(), f"{what}: {(~ok).sum()} differ, first at {np.argwhere(~ok)[:4].tolist()}"


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("shape", [(1,), (4097,), (7, 33), (3, 5, 131)], ids=str)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary(dtype: str, op: str, shape: tuple, layout: str) -> None:
    rng = np.random.default_rng(seed("nunary", dtype, op, shape, layout))
    x = rand(rng, shape, dtype, scale=2.0, positive=op in POSITIVE)
    out = poisoned(shape, dtype)
    r = getattr(gp, op)(view(x, layout), out=out)
    assert r is out and r.dtype is gp.as_dtype(dtype)
    assert_close(r, REF[op](as64(x)), dtype, name=op)
    if op in ("neg", "abs") or (op in ("sqrt", "rsqrt") and dtype in ("float32", "float64")):
        same(r, getattr(cpu, op)(x), op)


def test_routes_to_native() -> None:
    a = up(np.ones(4, np.float32))
    assert gp.routing.explain("exp", a).backend == "native"
    gp.routing.reset_stats()
    gp.exp(a)
    assert gp.routing.stats()["exp"] == {"native": 1}


@pytest.mark.parametrize("op", ["neg", "exp", "sin", "rsqrt"])
def test_strided_out_and_in_place(op: str) -> None:
    rng = np.random.default_rng(seed("nunary-out", op))
    x = rand(rng, (5, 33), "float32", positive=True)
    out = poisoned((5, 33), "float32", strided=True)
    assert getattr(gp, op)(view(x, "transposed"), out=out) is out
    assert_close(out, REF[op](as64(x)), "float32")
    y = up(x)
    getattr(gp, op)(y, out=y)
    assert_close(y, REF[op](as64(x)), "float32")


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_integer_inputs(dtype: str) -> None:
    rng = np.random.default_rng(seed("nunary-int", dtype))
    info = np.iinfo(np_dtype(dtype))
    x = rng.integers(info.min, info.max, size=(7, 33), endpoint=True).astype(np_dtype(dtype))
    x[0, :3] = [info.min, info.max, 0]
    for op in ("neg", "abs"):  # keep the dtype, wrap like NumPy (abs(INT_MIN) = INT_MIN)
        same(getattr(gp, op)(view(x, "strided")), getattr(cpu, op)(x), op)
    small = (x // max(1, info.max // 4)).astype(np_dtype(dtype))
    r = gp.exp(up(small))  # integers give float32
    assert r.dtype is gp.float32
    assert_close(r, np.exp(as64(small)), "float32")
    b = rng.random((7, 33)) < 0.5
    assert_close(gp.cos(up(b)), np.cos(b.astype(np.float64)), "float32")


def test_special_values() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-30, 100.0, -100.0], np.float32)
    for op in OPS:
        r = getattr(gp, op)(up(x)).to_numpy()
        ref = getattr(cpu, op)(x)
        np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=op)
        inf = np.isinf(ref)
        np.testing.assert_array_equal(r[inf], ref[inf], err_msg=op)
        fin = np.isfinite(ref)
        np.testing.assert_allclose(r[fin], ref[fin], rtol=1e-6, atol=1e-37, err_msg=op)
    assert not np.signbit(gp.abs(up(x)).to_numpy()).any()
    same(gp.sqrt(up(x)), cpu.sqrt(x), "sqrt")  # sqrt(-0.0) = -0.0, sqrt(-1) = NaN


def test_out_dtype_rounds_once_and_large() -> None:
    rng = np.random.default_rng(9)
    x = rand(rng, (9, 4097), "float32", positive=True)
    for op in ("sqrt", "neg"):
        r = getattr(un, op)(up(x), out_dtype=np.float16)  # float32 math, one rounding
        same(r, getattr(cpu, op)(x, out_dtype=np.float16), op)
    n = (1 << 22) + 3
    big = rand(rng, n, "bfloat16")
    assert_close(gp.tanh(up(big)), np.tanh(as64(big)), "bfloat16")
    gx = up(np.concatenate([np.zeros(1, big.dtype), big]))[1:]  # unaligned: the scalar path
    same(gp.neg(gx), cpu.neg(big), "neg unaligned")
