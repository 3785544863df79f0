"""Native twins of embedding (table[ids]) and bias_add on the GPU: the public ops with the route
forced to native, against NumPy (exact gathers) and float64 references."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit.backends.native import embedding as nemb

pytestmark = pytest.mark.gpu
FLOATS = ["float32", "float16", "bfloat16", "float64"]


def _up(x: np.ndarray, layout: str = "contiguous") -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return gp.from_numpy(
            np.ascontiguousarray(np.swapaxes(x, -1, -2)), device="cuda:0"
        ).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return gp.from_numpy(wide, device="cuda:0")[..., ::2]
    if layout == "rows" and x.ndim >= 2:
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return gp.from_numpy(tall, device="cuda:0")[::2]
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


@pytest.fixture(autouse=True)
def _native() -> object:
    with gp.route("embedding:native,bias_add:native"):
        yield


@pytest.mark.parametrize("ids_dtype", ["int32", "int64", "int8", "uint8", "int16"])
@pytest.mark.parametrize("ids_shape", [(1,), (7,), (3, 5), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [*FLOATS, "int32", "int8", "bool", "float8_e4m3fn", "int64"])
def test_embedding(dtype: str, ids_shape: tuple[int, ...], ids_dtype: str) -> None:
    rng = np.random.default_rng(seed("nemb", dtype, ids_shape, ids_dtype))
    dim = {"float32": 4097, "bfloat16": 4096, "float16": 33}.get(dtype, 48)
    table = rand(rng, (37, dim), dtype)
    ids = rng.integers(0, 37, ids_shape).astype(np.dtype(ids_dtype))
    td = _up(table)
    r = gp.embedding(_up(ids), td)
    assert r.dtype is gp.as_dtype(dtype) and r.shape == (*ids_shape, dim)
    assert gp.routing.explain("embedding", _up(ids), td).backend == "native"
    np.testing.assert_array_equal(r.to_numpy().view(np.uint8), table[ids].view(np.uint8))


def test_embedding_strided_ids_table_out() -> None:
    rng = np.random.default_rng(3)
    table = rand(rng, (11, 2 * 33), "float32")
    ids = rng.integers(0, 11, (5, 6)).astype(np.int64)
    t = _up(table)[:, ::2]  # every other column: the element path
    i = _up(ids, "transposed")
    out = _poison((5, 6, 33), "float32")
    assert gp.embedding(i, t, out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), table[:, ::2][ids])
    wide = _poison((5, 6, 66), "float32")
    o = wide[..., 33:]  # row-strided out=: written in place
    assert gp.embedding(i, t, out=o) is o
    np.testing.assert_array_equal(o.to_numpy(), table[:, ::2][ids])
    o2 = _poison((5, 6, 66), "float32")[..., ::2]  # strided out=: through a temporary
    gp.embedding(i, t, out=o2)
    np.testing.assert_array_equal(o2.to_numpy(), table[:, ::2][ids])
    # a window of rows of a bigger table (row stride != dim) with 16-byte packs
    big = rand(rng, (11, 64), "bfloat16")
    r = gp.embedding(_up(ids), _up(big)[:, 8:40])
    np.testing.assert_array_equal(r.to_numpy(), big[:, 8:40][ids])


def test_embedding_out_of_range_module() -> None:
    # The ops layer raises IndexError on the CPU only; on the GPU no host sync is taken, so an
    # out-of-range id gives a NaN row (float tables) or a zero row (others), never a bad read.
    table = rand(np.random.default_rng(4), (5, 16), "bfloat16")
    ids = np.array([0, 5, -1, 4], np.int32)
    r = nemb.embedding(_up(ids), _up(table)).to_numpy().astype(np.float32)
    np.testing.assert_array_equal(np.isnan(r).all(axis=1), [False, True, True, False])
    np.testing.assert_array_equal(r[[0, 3]], table[[0, 4]].astype(np.float32))
    ti = rand(np.random.default_rng(4), (5, 7), "int32")
    r = nemb.embedding(_up(ids), _up(ti)).to_numpy()
    np.testing.assert_array_equal(r[[1, 2]], 0)
    np.testing.assert_array_equal(r[[0, 3]], ti[[0, 4]])


@pytest.mark.parametrize("layout", ["contiguous", "rows", "strided", "transposed"])
@pytest.mark.parametrize("shape", [(1,), (7, 33), (2, 3, 4097), (5, 256)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_bias_add(dtype: str, shape: tuple[int, ...], layout: str) -> None:
    rng = np.random.default_rng(seed("nbias", dtype, shape, layout))
    x, b = rand(rng, shape, dtype), rand(rng, shape[-1], dtype)
    out = _poison(shape, dtype)
    xd, bd = _up(x, layout), _up(b)
    assert gp.bias_add(xd, bd, out=out) is out
    assert gp.routing.explain("bias_add", xd, bd).backend == "native"
    assert_close(out, as64(x) + as64(b), dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_bias_add_inplace_and_bias_dtypes(dtype: str) -> None:
    rng = np.random.default_rng(seed("nbias2", dtype))
    x, b = rand(rng, (9, 256), dtype), rand(rng, 256, dtype)
    d = _up(x)
    assert gp.bias_add_inplace(d, _up(b)) is d
    assert_close(d, as64(x) + as64(b), dtype)
    b32 = rand(rng, 256, "float32")  # a float32 bias of a half x: read as float32
    assert_close(gp.bias_add(_up(x), _up(b32)), as64(x) + as64(b32), dtype)
    b64 = rand(rng, 256, "float64")  # converted to x's compute type first, as the kernel would
    ref = as64(x) + b64.astype(np.float32).astype(np.float64)
    assert_close(gp.bias_add(_up(x), _up(b64)), ref, dtype)
    wide = _poison((9, 512), dtype)  # a strided bias (every other element)
    o = wide[:, ::2]
    gp.bias_add(_up(x, "rows"), _up(b, "strided"), out=o)
    assert_close(o, as64(x) + as64(b), dtype)


def test_bias_add_module_out_dtype() -> None:
    rng = np.random.default_rng(5)
    x, b = rand(rng, (7, 33), "float32"), rand(rng, 33, "float32")
    r = nemb.bias_add(_up(x), _up(b), out_dtype=np.float64)
    assert r.dtype is gp.float64
    np.testing.assert_array_equal(r.to_numpy(), as64(x) + as64(b))
