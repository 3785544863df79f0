"""Triton embedding gather and bias_add against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, np_dtype, rand, seed
from _tkutil import FLOATS64, LAYOUTS, poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels.embedding import bias_add, embedding


@pytest.mark.parametrize("ids_shape", [(1,), (7,), (3, 5), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [*FLOATS64, "int32", "int8"])
def test_embedding(device: str, dtype: str, ids_shape: tuple) -> None:
    rng = np.random.default_rng(seed("emb", dtype, ids_shape))
    table = rand(rng, (37, 4097 if dtype == "float32" else 33), dtype)
    ids = rng.integers(0, 37, ids_shape).astype(np.int32)
    r = embedding(up(ids, device), up(table, device))
    assert r.dtype is gp.as_dtype(dtype) and r.shape == (*ids_shape, table.shape[1])
    np.testing.assert_array_equal(r.to_numpy(), cpu.embedding(ids, table))


def test_embedding_strided_ids_table_out(device: str) -> None:
    rng = np.random.default_rng(3)
    table = rand(rng, (11, 2 * 33), "float32")
    ids = rng.integers(0, 11, (5, 6)).astype(np.int64)
    t = up(table, device)[:, ::2]  # every other column
    i = view(ids, "transposed", device)
    out = poisoned((5, 6, 33), "float32", device)
    assert embedding(i, t, out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), cpu.embedding(ids, table[:, ::2]))
    out2 = poisoned_strided((5, 6, 33), "float32", device)
    embedding(i, t, out=out2)
    np.testing.assert_array_equal(out2.to_numpy(), cpu.embedding(ids, table[:, ::2]))


def test_embedding_out_of_range(device: str) -> None:
    table = rand(np.random.default_rng(4), (5, 7), "float32")
    ids = np.array([0, 5, -1, 4], np.int32)
    r = embedding(up(ids, device), up(table, device)).to_numpy()
    np.testing.assert_array_equal(np.isnan(r).all(axis=1), [False, True, True, False])
    np.testing.assert_array_equal(r[[0, 3]], table[[0, 4]])
    ti = rand(np.random.default_rng(4), (5, 7), "int32")
    r = embedding(up(ids, device), up(ti, device)).to_numpy()
    np.testing.assert_array_equal(r[[1, 2]], 0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1,), (7, 33), (2, 3, 4097)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS64)
def test_bias_add(device: str, dtype: str, shape: tuple, layout: str) -> None:
    rng = np.random.default_rng(seed("bias", dtype, shape, layout))
    x, b = rand(rng, shape, dtype), rand(rng, shape[-1], dtype)
    out = poisoned(shape, dtype, device)
    assert bias_add(view(x, layout, device), up(b, device), out=out) is out
    assert_close(out, as64(x) + as64(b), dtype)


def test_bias_add_inplace_and_dtypes(device: str) -> None:
    rng = np.random.default_rng(5)
    x, b = rand(rng, (7, 33), "float32"), rand(rng, 33, "float32")
    d = up(x, device)
    assert bias_add(d, up(b, device), out=d) is d
    assert_close(d, as64(x) + as64(b), "float32")
    r = bias_add(up(x, device), up(b, device), out_dtype=np_dtype("float64"))
    assert r.dtype is gp.float64
    np.testing.assert_allclose(r.to_numpy(), cpu.bias_add(x, b, out_dtype=np.float64))
    out = poisoned_strided((7, 33), "float32", device)
    bias_add(up(x, device).T.T, view(b[None], "strided", device)[0], out=out)
    assert_close(out, as64(x) + as64(b), "float32")
