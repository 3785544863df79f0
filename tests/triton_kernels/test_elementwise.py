"""Triton elementwise launchers (binary ops, comparisons, where, clamp) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, np_dtype, rand, seed
from _tkutil import FLOATS, GPU, LAYOUTS, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import elementwise as ew

ARITH = ["add", "sub", "mul", "div", "maximum", "minimum", "pow"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
# (a shape, b shape): same shape, a broadcast row, a broadcast column, size 1, primes.
SHAPES = [
    ((4097,), (4097,)),
    ((7, 33), (33,)),
    ((7, 33), (7, 1)),
    ((1,), (1,)),
    ((3, 5, 7), (5, 1)),
]


def _operands(rng: np.random.Generator, op: str, sa: tuple, sb: tuple, dtype: str) -> tuple:
    a = rand(rng, sa, dtype, positive=op == "pow")
    b = rand(rng, sb, dtype, scale=0.5 if op == "pow" else 1.0)
    return a, b


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", ARITH)
@pytest.mark.parametrize("dtype", FLOATS)
def test_arith(device: str, dtype: str, op: str, shapes: tuple) -> None:
    rng = np.random.default_rng(seed(op, dtype, shapes))
    a, b = _operands(rng, op, *shapes, dtype)
    r = getattr(ew, op)(up(a, device), up(b, device), out_dtype=np_dtype(dtype))
    assert r.dtype is gp.as_dtype(dtype)
    ref = getattr(cpu, op)(as64(a), as64(b), out_dtype=np.float64)
    assert_close(r, ref, dtype, name=op)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["add", "mul", "div", "maximum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_arith_layouts_and_out(device: str, dtype: str, op: str, layout: str) -> None:
    rng = np.random.default_rng(seed("lay", op, dtype, layout))
    a, b = rand(rng, (5, 33), dtype), rand(rng, (5, 33), dtype)
    out = poisoned((5, 33), dtype, device)
    r = getattr(ew, op)(view(a, layout, device), view(b, "strided", device), out=out)
    assert r is out
    assert_close(out, getattr(cpu, op)(as64(a), as64(b), out_dtype=np.float64), dtype)
    strided_out = poisoned_strided((5, 33), dtype, device)
    getattr(ew, op)(view(a, layout, device), up(b[0], device), out=strided_out)
    assert_close(strided_out, getattr(cpu, op)(as64(a), as64(b[0]), out_dtype=np.float64), dtype)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_scalar_operands(device: str, op: str) -> None:
    rng = np.random.default_rng(seed("scalar", op))
    a = rand(rng, (7, 33), "float32", positive=True)
    s32 = np.asarray(0.3, dtype=np.float32)  # what the op layer passes
    r = getattr(ew, op)(up(a, device), s32, out_dtype=np.float32)
    assert_close(r, getattr(cpu, op)(as64(a), as64(s32), out_dtype=np.float64), "float32")
    r = getattr(ew, op)(1.7, up(a, device), out_dtype=np.float32)  # a Python scalar, left
    assert_close(r, getattr(cpu, op)(np.float64(np.float32(1.7)), as64(a), out_dtype=np.float64))


def test_float64_scalar_is_exact(device: str) -> None:
    # float64 operands keep their 53 bits through the scalar path (bits, not a float32 arg).
    if device == "cpu":
        a = np.array([1.0, 2.5, -3.25, 1e300], np.float64)
    else:
        a = rand(np.random.default_rng(3), (33,), "float64")
    for v in (0.1, 1e-300, -7.123456789012345):
        r = ew.add(up(a, device), v, out_dtype=np.float64).to_numpy()
        np.testing.assert_array_equal(r, a + v)


@pytest.mark.parametrize("shapes", SHAPES[:3], ids=str)
@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_compare(device: str, dtype: str, op: str, shapes: tuple) -> None:
    rng = np.random.default_rng(seed("cmp", op, dtype, shapes))
    a, b = rand(rng, shapes[0], dtype, low=-3, high=3), rand(rng, shapes[1], dtype, low=-3, high=3)
    if dtype == "float32":
        a.reshape(-1)[::3] = 0.5  # ties and NaN on purpose
        b.reshape(-1)[::2] = 0.5
        a.reshape(-1)[1] = np.nan
    out = poisoned(np.broadcast_shapes(a.shape, b.shape), "bool", device)
    r = getattr(ew, op)(view(a, "transposed", device), up(b, device), out=out)
    assert r.dtype is gp.bool_
    np.testing.assert_array_equal(r.to_numpy(), getattr(cpu, op)(a, b))
    s = np.asarray(0.5 if dtype == "float32" else 1, dtype=np_dtype(dtype))
    np.testing.assert_array_equal(
        getattr(ew, op)(up(a, device), s).to_numpy(), getattr(cpu, op)(a, s)
    )


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum", "pow"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int8"])
def test_integer_arith_exact(device: str, dtype: str, op: str) -> None:
    rng = np.random.default_rng(seed("int", op, dtype))
    lo = 0 if dtype == "uint8" else -9
    a = rand(rng, (7, 33), dtype, low=lo, high=10)
    b = rand(rng, (33,), dtype, low=0 if op == "pow" else lo, high=5 if op == "pow" else 10)
    r = getattr(ew, op)(up(a, device), up(b, device), out_dtype=np_dtype(dtype))
    np.testing.assert_array_equal(r.to_numpy(), getattr(cpu, op)(a, b, out_dtype=np_dtype(dtype)))
    # int32 array with a weak Python int that needs 64 bits in an int64 result
    if dtype == "int64" and op == "add":
        r = ew.add(up(a, device), 2**40 + 3, out_dtype=np.int64)
        np.testing.assert_array_equal(r.to_numpy(), a + (2**40 + 3))


def test_integer_pow_negative_exponent(device: str) -> None:
    # The reference raises; the kernel gives torch's values (documented in the module).
    a = np.array([1, -1, -1, 2, 0, 5], np.int32)
    e = np.array([-3, -3, -2, -1, 2, 0], np.int32)
    r = ew.pow(up(a, device), up(e, device), out_dtype=np.int32).to_numpy()
    np.testing.assert_array_equal(r, [1, -1, 1, 0, 0, 1])


def test_bool_arith_is_logical(device: str) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random((7, 9)) < 0.5, rng.random((7, 9)) < 0.5
    for op in ("add", "mul", "maximum", "minimum"):
        r = getattr(ew, op)(up(a, device), up(b, device), out_dtype=np.bool_).to_numpy()
        np.testing.assert_array_equal(r, getattr(cpu, op)(a, b, out_dtype=np.bool_), err_msg=op)


def test_mixed_dtypes(device: str) -> None:
    rng = np.random.default_rng(6)
    a, b = rand(rng, (7, 33), "int32"), rand(rng, (33,), "float32")
    r = ew.mul(up(a, device), up(b, device), out_dtype=np.float32)
    assert_close(r, as64(a) * as64(b), "float32")
    r = ew.div(up(a, device), up(a, device).T.T, out_dtype=np.float32)
    assert_close(r, np.ones((7, 33)), "float32")


def test_nan_propagation(device: str) -> None:
    a = np.array([1.0, np.nan, 3.0, -np.inf, 0.0], np.float32)
    b = np.array([np.nan, 2.0, 1.0, 1.0, -0.0], np.float32)
    for op in ("maximum", "minimum"):
        r = getattr(ew, op)(up(a, device), up(b, device), out_dtype=np.float32).to_numpy()
        np.testing.assert_array_equal(r, getattr(cpu, op)(a, b, out_dtype=np.float32))
    r = ew.div(up(a, device), 0.0, out_dtype=np.float32).to_numpy()
    np.testing.assert_array_equal(r, cpu.div(a, np.float32(0.0), out_dtype=np.float32))


def test_many_dims_split_on_host(device: str) -> None:
    # b broadcasts along every other dim, so no two neighbouring dims merge for both operands:
    # 7 collapsed dims, more than the kernel decomposes (the host splits the leading dim).
    rng = np.random.default_rng(7)
    a = rand(rng, (2, 3, 2, 3, 2, 3, 4), "float32")
    b = rand(rng, (1, 3, 1, 3, 1, 3, 1), "float32")
    out = poisoned(a.shape, "float32", device)
    ew.add(view(a, "strided", device), up(b, device), out=out)
    assert_close(out, as64(a) + as64(b), "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_where(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("where", dtype))
    cond = rng.random((7, 33)) < 0.5
    a, b = rand(rng, (7, 33), dtype), rand(rng, (33,), dtype)
    out = poisoned((7, 33), dtype, device)
    r = ew.where(up(cond, device), view(a, "transposed", device), up(b, device), out=out)
    np.testing.assert_array_equal(r.to_numpy(), cpu.where(cond, a, b))
    s = np.asarray(2.5, dtype=np_dtype(dtype))
    r = ew.where(up(cond[:, :1], device), s, up(b, device), out_dtype=np_dtype(dtype))
    np.testing.assert_array_equal(r.to_numpy(), cpu.where(cond[:, :1], s, b))
    # int32 and float32 operands -> float32, each converted exactly.
    ai = rand(rng, (7, 33), "int32")
    r = ew.where(up(cond, device), up(ai, device), up(a.astype(np.float32), device))
    np.testing.assert_array_equal(r.to_numpy(), cpu.where(cond, ai, a.astype(np.float32)))


@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
def test_clamp(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("clamp", dtype))
    x = rand(rng, (7, 33), dtype, scale=2.0, low=-20, high=20)
    lo, hi = rand(rng, (33,), dtype, low=-10, high=0), rand(rng, (7, 1), dtype, low=1, high=10)
    ct = np.float32 if dtype != "int32" else np.int32
    for mn, mx in ((-0.5, 0.7), (None, 0.7), (-0.5, None), ("lo", "hi"), ("lo", 0.1)):
        d_mn = up(lo, device) if mn == "lo" else None if mn is None else np.asarray(mn, ct)
        d_mx = up(hi, device) if mx == "hi" else None if mx is None else np.asarray(mx, ct)
        h_mn = lo if mn == "lo" else None if mn is None else np.asarray(mn, ct)
        h_mx = hi if mx == "hi" else None if mx is None else np.asarray(mx, ct)
        r = ew.clamp(view(x, "strided", device), d_mn, d_mx)
        ref = cpu.clamp(x, h_mn, h_mx)
        np.testing.assert_array_equal(r.to_numpy(), ref, err_msg=f"{mn} {mx}")


def test_clamp_nan(device: str) -> None:
    x = np.array([np.nan, -3.0, 0.5, 4.0], np.float32)
    r = ew.clamp(up(x, device), np.float32(-1.0), np.float32(1.0)).to_numpy()
    np.testing.assert_array_equal(r, [np.nan, -1.0, 0.5, 1.0])
    r = ew.clamp(up(x, device), np.float32(2.0), np.float32(1.0)).to_numpy()  # min > max -> max
    np.testing.assert_array_equal(r, [np.nan, 1.0, 1.0, 1.0])


@GPU
@pytest.mark.parametrize("op", ["add", "mul", "maximum"])
def test_large_contiguous_gpu(device: str, op: str) -> None:
    rng = np.random.default_rng(seed("large", op))
    a, b = rand(rng, (1 << 20) + 7, "bfloat16"), rand(rng, (1 << 20) + 7, "bfloat16")
    r = getattr(ew, op)(up(a, device), up(b, device), out_dtype=np_dtype("bfloat16"))
    assert_close(r, getattr(cpu, op)(as64(a), as64(b), out_dtype=np.float64), "bfloat16")
