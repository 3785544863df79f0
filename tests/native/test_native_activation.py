"""Native twins of sigmoid, relu, silu, gelu (erf and tanh) and the gated silu_mul / gelu_mul on
the GPU: the public ops with the route forced to native, against float64 references written
from the definitions; plus the module's own paths the ops layer does not reach (integer relu,
mixed input dtypes, broadcast up)."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, np_dtype, rand, seed

import pygpukit as gp
from pygpukit.backends.native import activation as nact

pytestmark = pytest.mark.gpu
FLOATS = ["float32", "float16", "bfloat16", "float64"]
# 1 and 7 (one partial pack), 4097 (odd: a flat run with a tail), rows of 33 (short rows, several
# per block), 3x4097 (rows not a whole number of packs), 2x5x1031 (leading dims flattened).
SHAPES = [(1,), (7,), (4097,), (9, 33), (3, 4097), (2, 5, 1031)]
LAYOUTS = ["contiguous", "rows", "strided", "transposed"]
UNARY = ["sigmoid", "relu", "silu", "gelu", "gelu_tanh", "softplus"]
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _ref(op: str, x: np.ndarray) -> np.ndarray:
    """Float64 formulas from the definitions (not the kernels' evaluation order)."""
    sig = 1.0 / (1.0 + np.exp(-x))
    if op == "sigmoid":
        return sig
    if op == "silu":
        return x * sig
    if op == "relu":
        return np.maximum(x, 0.0)
    if op == "softplus":
        return np.logaddexp(x, 0.0)
    if op == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1.0 + np.tanh(u))  # gelu_tanh


def _flush(ref: np.ndarray, dtype: str) -> np.ndarray:
    """The reference with values below half the dtype's smallest subnormal set to zero: what a
    correctly rounded result stores (e.g. gelu(-8) = -8e-16 is -0.0 in float16)."""
    tiny = float(ml_dtypes.finfo(np_dtype(dtype)).smallest_subnormal)
    return np.where(np.abs(ref) < tiny / 2, 0.0, ref)


def _rtol(dtype: str) -> float | None:
    # float64 erf-GELU: CUDA erfc: a few ulp, not docs/design.md's 1e-12 norm bound
    # at every point; 1e-11 is the Triton twin's bound (libdevice erfc).
    return 1e-11 if dtype == "float64" else None


def _up(x: np.ndarray, layout: str = "contiguous") -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return gp.from_numpy(
            np.ascontiguousarray(np.swapaxes(x, -1, -2)), device="cuda:0"
        ).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return gp.from_numpy(wide, device="cuda:0")[..., ::2]
    if layout == "rows" and x.ndim >= 2:  # every other row: read in place with a row stride
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return gp.from_numpy(tall, device="cuda:0")[::2]
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


def _call(op: str, x: gp.GPUArray, **kw: Any) -> gp.GPUArray:
    if op == "gelu_tanh":
        return gp.gelu(x, "tanh", **kw)  # type: ignore[no-any-return]
    return getattr(gp, op)(x, **kw)  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _native() -> object:
    ops = ("sigmoid", "relu", "silu", "gelu", "softplus", "silu_mul", "gelu_mul")
    with gp.route(",".join(f"{op}:native" for op in ops)):
        yield


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary(dtype: str, op: str, shape: tuple[int, ...], layout: str) -> None:
    rng = np.random.default_rng(seed("nact", dtype, op, shape, layout))
    x = rand(rng, shape, dtype, scale=3.0)
    out = _poison(shape, dtype)
    xd = _up(x, layout)
    r = _call(op, xd, out=out)
    assert r is out
    assert gp.routing.explain(op if op != "gelu_tanh" else "gelu", xd).backend == "native"
    assert_close(r, _flush(_ref(op, as64(x)), dtype), dtype, rtol=_rtol(dtype), name=op)


@pytest.mark.parametrize("op", ["silu_mul", "gelu_mul", "gelu_mul_tanh"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_gated(dtype: str, shape: tuple[int, ...], layout: str, op: str) -> None:
    rng = np.random.default_rng(seed("ngated", dtype, shape, layout, op))
    g, u = rand(rng, shape, dtype, scale=2.0), rand(rng, shape, dtype)
    base = {"silu_mul": "silu", "gelu_mul": "gelu", "gelu_mul_tanh": "gelu_tanh"}[op]
    out = _poison(shape, dtype)
    gd, ud = _up(g, layout), _up(u, "rows" if layout == "contiguous" else "contiguous")
    if op == "silu_mul":
        r = gp.silu_mul(gd, ud, out=out)
    else:
        r = gp.gelu_mul(gd, ud, "tanh" if op.endswith("tanh") else "none", out=out)
    assert r is out
    ref = _flush(_ref(base, as64(g)) * as64(u), dtype)
    assert_close(r, ref, dtype, rtol=_rtol(dtype), name=op)


@pytest.mark.parametrize("inter", [256, 257, 4096])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gated_fused_halves(dtype: str, inter: int) -> None:
    # gate and up as the two halves of one [M, 2I] projection (row-strided views, read in place;
    # I = 257 makes the row stride not a whole number of packs: the element path).
    rng = np.random.default_rng(seed("nhalves", dtype, inter))
    gu = rand(rng, (33, 2 * inter), dtype, scale=2.0)
    d = _up(gu)
    r = gp.silu_mul(d[:, :inter], d[:, inter:])
    assert r.shape == (33, inter) and r.is_contiguous()
    g64, u64 = as64(gu[:, :inter]), as64(gu[:, inter:])
    assert_close(r, _ref("silu", g64) * u64, dtype)


def test_out_layouts_and_offsets() -> None:
    rng = np.random.default_rng(11)
    x = rand(rng, (6, 40), "bfloat16", scale=3.0)
    ref = _ref("silu", as64(x))
    wide = _poison((6, 80), "bfloat16")
    o = wide[:, 40:]
    assert gp.silu(_up(x), out=o) is o  # row-strided out=, written in place
    assert_close(o, ref, "bfloat16")
    assert np.isnan(wide.to_numpy()[:, :40].astype(np.float32)).all()  # untouched
    out_t = _poison((40, 6), "bfloat16").T  # transposed out=: through a temporary
    gp.silu(_up(x), out=out_t)
    assert_close(out_t, ref, "bfloat16")
    # a view starting one element in: misaligned for packs, the element path
    buf = _up(np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)]))
    assert_close(gp.silu(buf[1:].reshape(6, 40)), ref, "bfloat16")


def test_specials() -> None:
    x = np.array([-100.0, -88.0, -0.0, 0.0, 88.0, 100.0, np.nan, -np.inf, np.inf], np.float32)
    from pygpukit.backends import cpu

    for op in ("sigmoid", "silu", "gelu", "relu", "softplus"):
        r = getattr(gp, op)(_up(x)).to_numpy()
        ref = getattr(cpu, op)(x)
        np.testing.assert_array_equal(np.isnan(r), np.isnan(ref), err_msg=op)
        np.testing.assert_allclose(r, ref, rtol=1e-6, atol=1e-37, err_msg=op)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "bool"])
def test_integer_and_bool_inputs(dtype: str) -> None:
    x = rand(np.random.default_rng(1), (7, 33), dtype)
    xd = _up(x, "rows")
    if dtype != "bool":
        assert gp.routing.explain("relu", xd).backend == "native"
        r = gp.relu(xd)  # integers stay integers
        assert r.dtype is gp.as_dtype(dtype)
        np.testing.assert_array_equal(r.to_numpy(), np.maximum(x, 0))
    for op in ("sigmoid", "silu", "gelu"):  # a float32 result (x converted first)
        s = getattr(gp, op)(xd)
        assert s.dtype is gp.float32
        assert_close(s, _ref(op, as64(x)), "float32", name=op)


def test_module_mixed_dtypes_and_broadcast() -> None:
    rng = np.random.default_rng(9)
    g, u = rand(rng, (5, 33), "float16"), rand(rng, (5, 33), "float32")
    r = nact.silu_mul(_up(g), _up(u))  # float16 and float32 -> float32
    assert r.dtype is gp.float32
    assert_close(r, _ref("silu", as64(g)) * as64(u), "float32")
    ub = rand(rng, 33, "float32")
    r = nact.gelu_mul(_up(g.astype(np.float32)), _up(ub))  # up broadcast over the rows
    assert_close(r, _ref("gelu", as64(g)) * as64(ub), "float32")
    with pytest.raises(TypeError, match="float16 result from float16 inputs only"):
        nact.silu(_up(u), out_dtype=np.float16)


def test_empty() -> None:
    x = gp.from_numpy(np.zeros((0, 8), np.float32), device="cuda:0")
    assert gp.silu(x).shape == (0, 8)
    assert gp.silu_mul(x, x).shape == (0, 8)
