"""NumPy backend: embedding lookup."""

from __future__ import annotations

import numpy as np
import pytest
from _data import FLOATS, np_dtype, rand, seed

from pygpukit.backends import cpu


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ids_shape", [(1,), (7,), (3, 33)], ids=str)
def test_embedding(ids_shape: tuple, dtype: str) -> None:
    rng = np.random.default_rng(seed("emb", ids_shape, dtype))
    table = rand(rng, (97, 13), dtype)
    ids = rng.integers(0, 97, size=ids_shape).astype(np.int32)
    out = cpu.embedding(ids, table)
    assert out.dtype == np_dtype(dtype) and out.shape == (*ids_shape, 13)
    for idx in np.ndindex(*ids_shape):  # a lookup is a copy: exact, bit for bit
        np.testing.assert_array_equal(out[idx].view(np.uint8), table[ids[idx]].view(np.uint8))
    assert not np.shares_memory(out, table)


def test_embedding_errors() -> None:
    table = np.ones((5, 2), np.float32)
    with pytest.raises(IndexError, match=r"ids\(1,\) = 5"):
        cpu.embedding(np.array([0, 5]), table)
    with pytest.raises(IndexError, match="-1"):
        cpu.embedding(np.array([-1]), table)
    with pytest.raises(TypeError, match="integers"):
        cpu.embedding(np.array([0.0]), table)
