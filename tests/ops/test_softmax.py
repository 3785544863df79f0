"""Public softmax on the test device (ops._helpers.DEVICE, CPU by default): axis, scale, causal
mask, layouts, out=, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import LAYOUTS, poisoned, up, view


def _ref(x: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        keep = np.ones(x.shape[-1], bool) if visible is None else visible[idx[-1]]
        if keep.any():
            e = np.where(keep, np.exp(x[idx] - x[idx][keep].max()), 0.0)
            out[idx] = e / math.fsum(e)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_softmax(dtype: str, layout: str) -> None:
    a = rand(np.random.default_rng(seed("sm", dtype, layout)), (3, 7, 129), dtype, scale=3.0)
    out = poisoned((3, 7, 129), dtype)
    r = gp.softmax(view(a, layout), out=out)
    assert r is out
    assert_close(r, _ref(as64(a)), dtype)


def test_softmax_axis_and_scale() -> None:
    a = rand(np.random.default_rng(1), (33, 5), "float32")
    ref = _ref((as64(a) * 0.5).T).T
    assert_close(gp.softmax(up(a), axis=0, scale=0.5), ref, "float32")


@pytest.mark.parametrize("sq_sk", [(7, 7), (3, 33), (9, 4)], ids=str)
def test_softmax_causal(sq_sk: tuple) -> None:
    sq, sk = sq_sk
    a = rand(np.random.default_rng(seed("causal", sq_sk)), (2, sq, sk), "float32")
    vis = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq
    r = gp.softmax(view(a, "transposed"), causal=True, scale=0.25)
    assert_close(r, _ref(as64(a) * 0.25, vis), "float32")


def test_errors() -> None:
    x = up(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="softmax: causal=True needs axis=-1"):
        gp.softmax(x, axis=0, causal=True)
    with pytest.raises(ValueError, match=r"softmax: causal=True needs x with >= 2 dims"):
        gp.softmax(up(np.ones(3, np.float32)), causal=True)
    with pytest.raises(ValueError, match="softmax: axis 2 is out of range"):
        gp.softmax(x, axis=2)
    with pytest.raises(
        TypeError, match=r"softmax: x must be a float16.*shape \(3,\) and dtype int64"
    ):
        gp.softmax(up(np.ones(3, np.int64)))
    with pytest.raises(TypeError, match="softmax: scale must be a number"):
        gp.softmax(x, scale="1")  # type: ignore[arg-type]
