"""Public elementwise ops on the test device (ops._helpers.DEVICE, CPU by default): binary ops,
scalars, comparisons, where, clamp, cast, bias_add; non-contiguous inputs, poisoned out= buffers
and argument errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, np_dtype, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

HALF = ("float32", "float16", "bfloat16")
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: np.where(a >= b, a, b),
    "minimum": lambda a, b: np.where(a <= b, a, b),
    "pow": lambda a, b: np.exp(b * np.log(a)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op: str, dtype: str, layout: str) -> None:
    rng = np.random.default_rng(seed(op, dtype, layout))
    a = rand(rng, (7, 33), dtype, positive=op == "pow")
    b = rand(rng, (33,), dtype, positive=op in ("div",))
    out = getattr(gp, op)(view(a, layout), view(b, layout))
    assert (
        out.dtype is gp.as_dtype(dtype) and out.shape == (7, 33) and out.device == gp.device(DEVICE)
    )
    assert_close(out, BINARY[op](as64(a), as64(b)), dtype, name=op)


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "div"])
def test_binary_out_poisoned(op: str) -> None:
    rng = np.random.default_rng(seed("out", op))
    a, b = rand(rng, (5, 4097), "float32"), rand(rng, (5, 1), "float32", positive=True)
    out = poisoned((5, 4097), "float32")
    res = getattr(gp, op)(up(a), up(b), out=out)
    assert res is out
    assert_close(out, BINARY[op](as64(a), as64(b)), "float32")


def test_out_can_be_a_strided_view_and_alias_an_input() -> None:
    a = rand(np.random.default_rng(1), (4, 6), "float32")
    base = up(np.full((4, 12), np.nan, np.float32))
    target = base[:, ::2]
    gp.mul(up(a), 2.0, out=target)
    host = base.to_numpy()
    assert_close(host[:, ::2], 2 * as64(a), "float32")
    assert np.isnan(host[:, 1::2]).all()  # the gaps are untouched
    x = up(a)
    gp.add(x, x, out=x)  # in place, aliasing both inputs
    assert_close(x, 2 * as64(a), "float32")


def test_scalars_on_either_side_and_weak_promotion() -> None:
    a = rand(np.random.default_rng(2), 33, "float16")
    x = up(a)
    r = gp.add(x, 2.5)
    assert r.dtype is gp.float16
    assert_close(r, as64(a) + 2.5, "float16")
    r = gp.sub(2.5, x)
    assert_close(r, 2.5 - as64(a), "float16")
    assert_close(gp.div(1.0, x), 1.0 / as64(a), "float16")
    assert_close(3 * x, 3 * as64(a), "float16")
    assert_close(x / 4, as64(a) / 4, "float16")
    i = up(np.arange(1, 8, dtype=np.int32))
    assert (i + 2.5).dtype is gp.float32 and (i + 2).dtype is gp.int32
    assert_close(i + 2.5, np.arange(1, 8) + 2.5, "float32")
    assert gp.div(i, 2).dtype is gp.float32
    assert_close(gp.div(i, 2), np.arange(1, 8) / 2, "float32")
    b = up(np.array([True, False]))
    assert (b + 1).dtype is gp.int64


def test_scalar_is_not_rounded_to_half_before_the_op() -> None:
    # x + 0.1 computes x + float32(0.1) and rounds once (torch opmath), not x + float16(0.1).
    a = np.arange(-40, 40, dtype=np.float16) / np.float16(8)
    out = gp.add(up(a), 0.1).to_numpy()
    want = (a.astype(np.float32) + np.float32(0.1)).astype(np.float16)
    np.testing.assert_array_equal(out, want)


def test_mixed_dtype_promotion() -> None:
    rng = np.random.default_rng(3)
    h, f = rand(rng, 7, "float16"), rand(rng, 7, "float32")
    bf = rand(rng, 7, "bfloat16")
    assert gp.add(up(h), up(f)).dtype is gp.float32
    r = gp.mul(up(h), up(bf))
    assert r.dtype is gp.float32
    assert_close(r, as64(h) * as64(bf), "float32")
    i = rand(rng, 7, "int32")
    assert gp.add(up(i), up(h)).dtype is gp.float16


def test_int_ops_exact() -> None:
    rng = np.random.default_rng(4)
    a, b = rand(rng, (7, 5), "int32"), rand(rng, (5,), "int32")
    for op in ("add", "sub", "mul", "maximum", "minimum"):
        r = getattr(gp, op)(view(a, "strided"), up(b))
        assert r.dtype is gp.int32
        np.testing.assert_array_equal(r.to_numpy(), BINARY[op](a.astype(np.int64), b))
    np.testing.assert_array_equal(gp.pow(up(a), 2).to_numpy(), a.astype(np.int64) ** 2)


CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons(op: str) -> None:
    rng = np.random.default_rng(seed("cmp", op))
    a, b = rand(rng, (33, 7), "bfloat16"), rand(rng, (7,), "bfloat16")
    a[::2] = b
    out = poisoned((33, 7), "bool")
    r = getattr(gp, op)(view(a, "transposed"), up(b), out=out)
    assert r is out and r.dtype is gp.bool_
    np.testing.assert_array_equal(r.to_numpy(), CMP[op](as64(a), as64(b)))
    np.testing.assert_array_equal(getattr(gp, op)(up(a), 0.5).to_numpy(), CMP[op](as64(a), 0.5))


def test_comparison_operators() -> None:
    a = np.array([1.0, 2.0, 3.0], np.float32)
    x = up(a)
    np.testing.assert_array_equal((x < 2).to_numpy(), a < 2)
    np.testing.assert_array_equal((x == 2).to_numpy(), a == 2)
    np.testing.assert_array_equal((2 >= x).to_numpy(), 2 >= a)
    # A scalar compares after rounding to the array's dtype (float16(0.1) == 0.1 on float16).
    assert bool(gp.eq(up(np.array([0.1], np.float16)), 0.1).to_numpy()[0])


def test_where() -> None:
    rng = np.random.default_rng(5)
    cond = rng.random((7, 33)) < 0.5
    a, b = rand(rng, (7, 33), "float16"), rand(rng, (33,), "float16")
    out = poisoned((7, 33), "float16")
    r = gp.where(view(cond, "transposed"), view(a, "strided"), up(b), out=out)
    assert r is out
    assert_close(r, np.where(cond, as64(a), as64(b)), rtol=0.0, atol=0.0)
    r = gp.where(up(cond), up(a), 0.0)
    assert r.dtype is gp.float16
    assert_close(r, np.where(cond, as64(a), 0.0), rtol=0.0, atol=0.0)
    r = gp.where(up(cond), 1.5, -2)
    assert r.dtype is gp.float32 and set(r.to_numpy().ravel()) <= {1.5, -2.0}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_clamp(layout: str) -> None:
    rng = np.random.default_rng(seed("clamp", layout))
    a = rand(rng, (9, 33), "bfloat16")
    x64 = as64(a)
    r = gp.clamp(view(a, layout), -0.5, 0.75)
    assert r.dtype is gp.bfloat16
    assert_close(r, np.clip(x64, -0.5, 0.75), "bfloat16")
    assert_close(gp.clamp(view(a, layout), min=0.0), np.maximum(x64, 0.0), "bfloat16")
    assert_close(gp.clamp(view(a, layout), max=0.0), np.minimum(x64, 0.0), "bfloat16")
    lo = rand(rng, 33, "bfloat16")
    out = poisoned((9, 33), "bfloat16")
    gp.clamp(view(a, layout), up(lo), None, out=out)
    assert_close(out, np.maximum(x64, as64(lo)), "bfloat16")
    hi = rand(rng, 33, "bfloat16")
    assert_close(gp.clamp(up(a), max=up(hi)), np.minimum(x64, as64(hi)), "bfloat16")
    i = up(np.arange(-5, 5, dtype=np.int32))
    assert gp.clamp(i, 0, 3).dtype is gp.int32
    assert gp.clamp(i, 0.5).dtype is gp.float32  # a float bound promotes (torch.clamp)


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64", "int32"])
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16", "float8_e4m3fn", "int64"])
def test_cast_and_astype(src: str, dst: str) -> None:
    a = rand(np.random.default_rng(seed("cast", src, dst)), (7, 33), src, scale=3.0)
    want = as64(a).astype(np.float32) if src != "float64" else as64(a)
    want = want.astype(np_dtype(dst))  # NumPy / ml_dtypes conversion, round to nearest even
    out = poisoned((7, 33), dst)
    r = gp.cast(view(a, "strided"), dst, out=out)
    assert r is out and r.dtype is gp.as_dtype(dst)
    np.testing.assert_array_equal(as64(r.to_numpy()), as64(want))
    np.testing.assert_array_equal(as64(up(a).astype(dst).to_numpy()), as64(want))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bias_add_and_inplace(layout: str) -> None:
    rng = np.random.default_rng(seed("bias", layout))
    a, b = rand(rng, (3, 7, 33), "bfloat16"), rand(rng, 33, "bfloat16")
    out = poisoned((3, 7, 33), "bfloat16")
    r = gp.bias_add(view(a, layout), up(b), out=out)
    assert r is out
    assert_close(r, as64(a) + as64(b), "bfloat16")
    x = view(a, layout)
    gp.bias_add_inplace(x, up(b))
    assert_close(x, as64(a) + as64(b), "bfloat16")


def test_bias_add_inplace_writes_only_the_view() -> None:
    base = up(np.zeros((4, 8), np.float32))
    gp.bias_add_inplace(base[:, ::2], up(np.arange(1, 5, dtype=np.float32)))
    host = base.to_numpy()
    np.testing.assert_array_equal(host[:, ::2], np.tile(np.arange(1, 5), (4, 1)))
    assert (host[:, 1::2] == 0).all()


def test_errors_name_the_argument() -> None:
    x = up(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"add: a must be a GPUArray or a Python .* ndarray"):
        gp.add(np.ones(3), x)
    with pytest.raises(TypeError, match="mul: b must be"):
        gp.mul(x, "2")
    with pytest.raises(TypeError, match="at least one GPUArray"):
        gp.add(1.0, 2.0)
    with pytest.raises(ValueError, match=r"add: shapes do not broadcast: a \(2, 3\), b \(4,\)"):
        gp.add(x, up(np.ones(4, np.float32)))
    f8 = up(np.ones(3, ml_dtypes.float8_e4m3fn))
    with pytest.raises(TypeError, match=r"add: a \(shape \(3,\) and dtype float8_e4m3fn\)"):
        gp.add(f8, f8)
    with pytest.raises(ValueError, match=r"add: out has shape \(3, 2\).*result has shape \(2, 3\)"):
        gp.add(x, 1.0, out=gp.empty((3, 2), device=DEVICE))
    with pytest.raises(TypeError, match=r"add: out has .*float16 but the result dtype is float32"):
        gp.add(x, 1.0, out=gp.empty((2, 3), dtype="float16", device=DEVICE))
    with pytest.raises(TypeError, match="out must be a GPUArray"):
        gp.add(x, 1.0, out=np.empty((2, 3), np.float32))
    with pytest.raises(TypeError, match="sub: not defined for bool"):
        gp.sub(up(np.array([True])), up(np.array([False])))
    with pytest.raises(TypeError, match=r"where: cond must be a bool array, got shape \(2, 3\)"):
        gp.where(x, x, x)
    with pytest.raises(ValueError, match="clamp: at least one of min and max"):
        gp.clamp(x)
    with pytest.raises(TypeError, match="clamp: max must be"):
        gp.clamp(x, 0.0, "1")
    with pytest.raises(ValueError, match=r"bias_add: bias has shape \(2,\) but must be \(3,\)"):
        gp.bias_add(x, up(np.ones(2, np.float32)))
    with pytest.raises(TypeError, match="bias_add_inplace: x must be a float16/bfloat16"):
        gp.bias_add_inplace(up(np.ones((2, 3), np.int32)), up(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="int4"):
        gp.cast(x, "int4")
    with pytest.raises(ValueError, match="does not fit"):
        gp.add(up(np.ones(2, np.int8)), 1000)
