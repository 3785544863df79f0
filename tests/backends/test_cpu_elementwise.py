"""NumPy backend: binary elementwise ops, comparisons, where, clamp, cast, bias_add."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed
from hypothesis import given, settings
from hypothesis import strategies as st

from pygpukit.backends import cpu

SHAPES = [((1,), (1,)), ((7,), (7,)), ((33, 7), (7,)), ((4097,), (1,)), ((5, 1, 3), (1, 11, 3))]

# float64 reference formulas, written independently of the backend.
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: np.where(a >= b, a, b),
    "minimum": lambda a, b: np.where(a <= b, a, b),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_float(op: str, shapes: tuple, dtype: str) -> None:
    rng = np.random.default_rng(seed(op, shapes, dtype))
    a = rand(rng, shapes[0], dtype)
    b = rand(rng, shapes[1], dtype, positive=op == "div")
    out = getattr(cpu, op)(a, b)
    assert out.dtype == np_dtype(dtype)
    assert out.shape == np.broadcast_shapes(a.shape, b.shape)
    assert_close(out, BINARY[op](as64(a), as64(b)), dtype, name=op)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_float(dtype: str) -> None:
    rng = np.random.default_rng(3)
    a = rand(rng, (33, 7), dtype, positive=True)
    b = rand(rng, (7,), dtype)
    out = cpu.pow(a, b)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, np.exp(as64(b) * np.log(as64(a))), dtype)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_int_stays_int(op: str) -> None:
    rng = np.random.default_rng(4)
    a, b = rand(rng, (7, 5), "int32"), rand(rng, (5,), "int32")
    out = getattr(cpu, op)(a, b)
    assert out.dtype == np.int32
    ref = BINARY[op](a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(out, ref)


def test_int_pow_and_wraparound() -> None:
    a = np.array([2, 3, -4], np.int32)
    np.testing.assert_array_equal(cpu.pow(a, np.array([10, 3, 3], np.int32)), [1024, 27, -64])
    big = np.array([2**31 - 1], np.int32)
    # Two's-complement wraparound, as on the GPU; no host warning or error.
    assert cpu.add(big, np.array([1], np.int32))[0] == -(2**31)


def test_div_int_gives_float32_true_division() -> None:
    out = cpu.div(np.array([7, -7, 1], np.int32), np.array([2, 2, 3], np.int32))
    assert out.dtype == np.float32
    assert_close(out, np.array([3.5, -3.5, 1 / 3]), "float32")
    with pytest.raises(TypeError, match="floating out_dtype"):
        cpu.div(np.ones(2, np.int32), np.ones(2, np.int32), out_dtype=np.int32)


def test_out_dtype_rounds_once_from_float32() -> None:
    # bf16 array + float32 scalar as the op layer passes it: result bf16, computed in float32.
    rng = np.random.default_rng(5)
    a = rand(rng, 4097, "bfloat16")
    s = np.float32(2.5)
    out = cpu.add(a, s, out_dtype=ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16
    ref = (as64(a) + 2.5).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


def test_mixed_half_types_promote_to_float32() -> None:
    a = np.array([1.5], np.float16)
    b = np.array([2.25], ml_dtypes.bfloat16)
    out = cpu.mul(a, b)
    assert out.dtype == np.float32 and out[0] == 3.375


def test_nan_propagation_and_ieee_specials() -> None:
    nan = np.float32(np.nan)
    a = np.array([nan, 1.0, 0.0], np.float32)
    b = np.array([1.0, nan, 0.0], np.float32)
    assert np.isnan(cpu.maximum(a, b)[:2]).all()
    assert np.isnan(cpu.minimum(a, b)[:2]).all()
    assert np.isnan(cpu.div(a, b)[2])  # 0/0
    assert cpu.div(np.float32([1.0]), np.float32([0.0]))[0] == np.inf


CMP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons(op: str, dtype: str) -> None:
    rng = np.random.default_rng(6)
    a = rand(rng, (33, 7), dtype)
    b = rand(rng, (7,), dtype)
    a[::3] = b  # make ties present
    out = getattr(cpu, op)(a, b)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, CMP[op](as64(a), as64(b)))


def test_comparison_nan_and_mixed_types() -> None:
    a = np.array([np.nan, 1.0], np.float32)
    assert not cpu.eq(a, a)[0] and cpu.ne(a, a)[0]
    # float16 1/3 vs float32 1/3 differ: compared after widening, not after narrowing.
    h = np.array([1 / 3], np.float16)
    f = np.array([1 / 3], np.float32)
    assert not cpu.eq(h, f)[0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_where(dtype: str) -> None:
    rng = np.random.default_rng(7)
    cond = rng.random((7, 33)) < 0.5
    a = rand(rng, (7, 33), dtype)
    b = rand(rng, (33,), dtype)
    out = cpu.where(cond, a, b)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, np.where(cond, as64(a), as64(b)), rtol=0.0, atol=0.0)


def test_where_converts_each_operand_once() -> None:
    cond = np.array([True, False])
    a = np.array([1 / 3, 1 / 3], np.float32)
    out = cpu.where(cond, a, np.float32(0.0), out_dtype=np.float16)
    assert out.dtype == np.float16 and out[0] == np.float16(1 / 3) and out[1] == 0


@pytest.mark.parametrize("dtype", [*FLOATS, "int32"])
def test_clamp(dtype: str) -> None:
    rng = np.random.default_rng(8)
    x = rand(rng, 4097, dtype)
    lo, hi = (-0.5, 0.75) if dtype != "int32" else (-10, 20)
    x64 = as64(x)
    ref = np.where(x64 < lo, lo, np.where(x64 > hi, hi, x64))
    out = cpu.clamp(x, lo, hi)
    assert out.dtype == np_dtype(dtype)
    bound = "float64" if dtype == "int32" else dtype
    assert_close(as64(out), ref, bound)
    assert_close(as64(cpu.clamp(x, min=lo)), np.where(x64 < lo, lo, x64), bound)
    assert_close(as64(cpu.clamp(x, max=hi)), np.where(x64 > hi, hi, x64), bound)


def test_clamp_array_bounds_nan_and_inverted() -> None:
    x = np.array([np.nan, -3.0, 0.5, 9.0], np.float32)
    lo = np.array([0.0, 0.0, 0.0, 0.0], np.float32)
    hi = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    out = cpu.clamp(x, lo, hi)
    assert np.isnan(out[0]) and list(out[1:]) == [0.0, 0.5, 1.0]
    # min > max: every element becomes max (torch.clamp).
    assert list(cpu.clamp(np.float32([-1.0, 5.0]), 2.0, 1.0)) == [1.0, 1.0]


def test_cast_rounds_to_nearest_even() -> None:
    # 1 + 2^-8 lies exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1);
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to even (1 + 2^-6).
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], np.float32)
    out = cpu.cast(x, dtype=ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(out, [1.0, 1 + 2**-6, 1 + 2**-7])


@pytest.mark.parametrize("target", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_cast_is_nearest_representable(target: str) -> None:
    rng = np.random.default_rng(9)
    x = rand(rng, 4097, "float32", scale=4.0)
    dt = np_dtype(target)
    out = as64(cpu.cast(x, dtype=dt))
    # Every representable value of the 8-bit / 16-bit type near x: out must be a closest one.
    bits = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    grid = as64(bits.view(dt))
    grid = np.unique(grid[np.isfinite(grid)])
    pos = np.clip(np.searchsorted(grid, as64(x)), 1, len(grid) - 1)
    nearest = np.minimum(np.abs(grid[pos] - as64(x)), np.abs(grid[pos - 1] - as64(x)))
    np.testing.assert_array_equal(np.abs(out - as64(x)), nearest)


def test_cast_fp8_out_of_range_and_ints() -> None:
    x = np.array([1000.0, -1000.0, 448.0], np.float32)
    e4 = cpu.cast(x, dtype=ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.isnan(e4[0]) and np.isnan(e4[1]) and e4[2] == 448.0  # e4m3fn has no inf
    e5 = cpu.cast(np.float32([1e6]), dtype=ml_dtypes.float8_e5m2).astype(np.float32)
    assert np.isinf(e5[0])
    np.testing.assert_array_equal(cpu.cast(np.float32([2.7, -2.7]), dtype=np.int32), [2, -2])
    f16 = np.array([1.5, -2.25], np.float16)
    assert cpu.cast(f16, dtype=ml_dtypes.bfloat16).astype(np.float32).tolist() == [1.5, -2.25]


def test_cast_same_dtype_returns_a_copy() -> None:
    x = np.arange(5, dtype=np.float32)
    y = cpu.cast(x, dtype=np.float32)
    assert not np.shares_memory(x, y)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (3, 5, 4097)], ids=str)
def test_bias_add(dtype: str, shape: tuple) -> None:
    rng = np.random.default_rng(10)
    x = rand(rng, shape, dtype)
    b = rand(rng, shape[-1], dtype)
    out = cpu.bias_add(x, b)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, as64(x) + as64(b)[None, :], dtype)


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.floats(-(2.0**100), 2.0**100, width=32), min_size=1, max_size=20),
    b=st.floats(-(2.0**100), 2.0**100, width=32),
)
def test_max_min_partition_the_pair(a: list[float], b: float) -> None:
    # Property: {maximum, minimum} = {a, b} elementwise, so their sum is exactly a + b.
    x = np.array(a, np.float32)
    y = np.array(b, np.float32)
    hi, lo = cpu.maximum(x, y), cpu.minimum(x, y)
    assert (hi >= lo).all()
    np.testing.assert_array_equal(cpu.add(hi, lo), cpu.add(x, y))
