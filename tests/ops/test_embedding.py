"""Public embedding on the test device (ops._helpers.DEVICE, CPU by default)."""

from __future__ import annotations

import numpy as np
import pytest
from _data import rand

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up, view


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
def test_embedding(dtype: str) -> None:
    rng = np.random.default_rng(1)
    table = rand(rng, (101, 33), dtype)
    ids = rng.integers(0, 101, size=(3, 7)).astype(np.int64)
    out = poisoned((3, 7, 33), dtype)
    r = gp.embedding(view(ids, "strided"), view(table, "transposed"), out=out)
    assert r is out and r.dtype is gp.as_dtype(dtype)
    np.testing.assert_array_equal(r.to_numpy().view(np.uint8), table[ids].view(np.uint8))
    r = gp.embedding(up(ids.astype(np.int32)), up(table))
    np.testing.assert_array_equal(r.to_numpy().view(np.uint8), table[ids].view(np.uint8))


def test_errors() -> None:
    table = up(np.ones((5, 4), np.float32))
    with pytest.raises(
        TypeError,
        match=r"embedding: ids must be an integer array, got shape \(2,\) and dtype float32",
    ):
        gp.embedding(up(np.zeros(2, np.float32)), table)
    with pytest.raises(ValueError, match=r"embedding: table must be \[num_embeddings, dim\]"):
        gp.embedding(up(np.zeros(2, np.int32)), up(np.ones(5, np.float32)))
    bad_ids = up(np.array([1, 5], np.int32))
    if DEVICE == "cpu":
        with pytest.raises(IndexError, match="out of range"):
            gp.embedding(bad_ids, table)
    else:
        # On a GPU the ids stay on the device (no host sync to check them): an out-of-range id
        # yields a NaN row for a float table, never an out-of-bounds read (documented).
        rows = gp.embedding(bad_ids, table).to_numpy()
        assert np.all(rows[0] == 1.0) and np.all(np.isnan(rows[1]))
    with pytest.raises(TypeError, match="embedding: table must be a GPUArray"):
        gp.embedding(up(np.zeros(2, np.int32)), np.ones((5, 4)))
