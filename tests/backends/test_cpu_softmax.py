"""NumPy backend: softmax (scale, axis, causal mask aligned to the end of the keys)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from pygpukit.backends import cpu


def _softmax_rows(x: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    """Row-by-row float64 softmax with math.fsum; invisible keys get 0, empty rows give 0."""
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        keep = np.ones(row.shape, bool) if visible is None else visible[idx[-1]]
        if not keep.any():
            continue
        e = np.where(keep, np.exp(row - row[keep].max()), 0.0)
        out[idx] = e / math.fsum(e)
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (3, 4097), (2, 3, 129)], ids=str)
def test_softmax_last_axis(shape: tuple, dtype: str) -> None:
    x = rand(np.random.default_rng(seed("softmax", shape, dtype)), shape, dtype, scale=3.0)
    out = cpu.softmax(x)
    assert out.dtype == np_dtype(dtype)
    assert_close(out, _softmax_rows(as64(x)), dtype)


def test_softmax_scale_and_axis() -> None:
    x = rand(np.random.default_rng(1), (33, 7, 5), "float32")
    ref = np.moveaxis(_softmax_rows(np.moveaxis(as64(x) * 0.125, 0, -1)), -1, 0)
    assert_close(cpu.softmax(x, axis=0, scale=0.125), ref, "float32")


def test_softmax_large_logits_do_not_overflow() -> None:
    x = np.array([[1000.0, 999.0, -1000.0]], np.float32)
    assert_close(cpu.softmax(x), _softmax_rows(as64(x)), "float32")


@pytest.mark.parametrize("sq_sk", [(1, 1), (7, 7), (1, 33), (5, 33), (9, 4), (4, 4097)], ids=str)
def test_softmax_causal(sq_sk: tuple) -> None:
    sq, sk = sq_sk
    x = rand(np.random.default_rng(seed("causal", sq, sk)), (2, sq, sk), "float32")
    visible = np.array([[j <= i + sk - sq for j in range(sk)] for i in range(sq)])
    out = cpu.softmax(x, causal=True)
    ref = _softmax_rows(as64(x), visible)
    assert_close(out, ref, "float32")
    # Masked positions are exactly zero; with sq > sk the first rows see nothing and are zero.
    assert (out[:, ~visible] == 0).all()
    if sq > sk:
        assert (out[:, : sq - sk] == 0).all()


def test_softmax_causal_rejects_bad_axis_and_rank() -> None:
    with pytest.raises(ValueError, match="axis"):
        cpu.softmax(np.ones((3, 3), np.float32), axis=0, causal=True)
    with pytest.raises(ValueError, match="2 dims"):
        cpu.softmax(np.ones(3, np.float32), causal=True)


def test_softmax_nan_and_all_neg_inf_rows() -> None:
    x = np.array([[0.0, np.nan], [-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    out = cpu.softmax(x)
    assert np.isnan(out[0]).all()
    assert out[1].tolist() == [0.0, 0.0]
    assert out[2].tolist() == [1.0, 0.0]


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float32,
        array_shapes(min_dims=1, max_dims=3, max_side=40),
        elements=st.floats(-50, 50, width=32),
    ),
    st.floats(0.01, 4.0),
)
def test_softmax_rows_sum_to_one(x: np.ndarray, scale: float) -> None:
    out = cpu.softmax(x, scale=scale).astype(np.float64)
    assert (out >= 0).all()
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, atol=x.shape[-1] * 2e-7)
    # The largest logit gets the largest probability (softmax is monotone in each row).
    at_max = np.take_along_axis(out, np.argmax(x, -1)[..., None], -1)[..., 0]
    np.testing.assert_array_equal(at_max, out.max(axis=-1))
