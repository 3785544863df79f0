"""Native twin of softmax (any axis, scale, end-aligned causal mask) on the GPU: the public op
with the route forced to native, against a float64 reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit.backends.native import softmax as nsm

pytestmark = pytest.mark.gpu
FLOATS = ["float32", "float16", "bfloat16", "float64"]
# Rows of 1, 7 and 33 (several rows a block), 4097 (odd: single elements, 1024 threads),
# 8192 (the benchmark's rows), 16411 (prime: the looped two-pass kernel), 40000 (packs, looped).
SHAPES = [(1, 1), (3, 7), (5, 4, 33), (3, 4097), (2, 8192), (2, 16411), (2, 40000)]
KWS = [{}, {"scale": 0.125}, {"causal": True}, {"causal": True, "scale": 3.0}]


def _ref(x: np.ndarray, axis: int = -1, scale: float | None = None, causal: bool = False):
    s = x * (1.0 if scale is None else scale)
    if causal:
        sq, sk = x.shape[-2:]
        vis = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(vis, s, -np.inf)
    m = np.max(s, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m)
    d = e.sum(axis=axis, keepdims=True)
    return e / np.where(d == 0, 1.0, d)


def _up(x: np.ndarray, layout: str = "contiguous") -> gp.GPUArray:
    if layout == "transposed":
        return gp.from_numpy(
            np.ascontiguousarray(np.swapaxes(x, -1, -2)), device="cuda:0"
        ).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return gp.from_numpy(wide, device="cuda:0")[..., ::2]
    if layout == "rows":  # every other row: read in place with a row stride
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return gp.from_numpy(tall, device="cuda:0")[::2]
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


@pytest.fixture(autouse=True)
def _native() -> object:
    with gp.route("softmax:native"):
        yield


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kw", KWS, ids=["plain", "scale", "causal", "causal-scale"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(dtype: str, kw: dict[str, Any], shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed("nsoftmax", dtype, shape, str(kw)))
    x = rand(rng, shape, dtype, scale=3.0)
    out = _poison(shape, dtype)
    xd = _up(x)
    r = gp.softmax(xd, out=out, **kw)
    assert r is out
    assert gp.routing.explain("softmax", xd, axis=-1).backend == "native"
    assert_close(r, _ref(as64(x), **kw), dtype)


@pytest.mark.parametrize("layout", ["rows", "strided", "transposed"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [33, 1024, 4097])
def test_layouts_and_out(layout: str, causal: bool, n: int) -> None:
    rng = np.random.default_rng(seed("nsm-lay", layout, causal, n))
    x = rand(rng, (3, 9, n), "bfloat16", scale=2.0)
    ref = _ref(as64(x), causal=causal)
    out = _poison(x.shape, "bfloat16")
    assert gp.softmax(_up(x, layout), causal=causal, out=out) is out
    assert_close(out, ref, "bfloat16")
    wide = _poison((3, 9, 2 * n), "bfloat16")
    o = wide[..., :n]  # a row-strided out=: written in place
    assert gp.softmax(_up(x, layout), causal=causal, out=o) is o
    assert_close(o, ref, "bfloat16")
    assert np.isnan(wide.to_numpy()[..., n:].astype(np.float32)).all()
    o2 = _poison((3, 9, 2 * n), "bfloat16")[..., ::2]  # a strided out=: through a temporary
    gp.softmax(_up(x, layout), causal=causal, out=o2)
    assert_close(o2, ref, "bfloat16")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [0, 1, -2])
def test_other_axes(dtype: str, axis: int) -> None:
    rng = np.random.default_rng(seed("nsm-axis", axis, dtype))
    x = rand(rng, (7, 5, 33), dtype)
    for layout in ("contiguous", "transposed"):
        out = _poison(x.shape, dtype)
        r = gp.softmax(_up(x, layout), axis=axis, scale=0.5, out=out)
        assert r is out
        assert_close(r, _ref(as64(x), axis=axis, scale=0.5), dtype)
    # the axis followed only by size-1 dims is the last axis of a view
    x1 = rand(rng, (4, 300, 1), dtype)
    assert_close(gp.softmax(_up(x1), axis=1), _ref(as64(x1), axis=1), dtype)
    # a long axis: each column runs its online pass over 5000 entries
    xl = rand(rng, (2, 5000, 3), dtype)
    assert_close(gp.softmax(_up(xl), axis=1), _ref(as64(xl), axis=1), dtype)


def test_causal_more_queries_than_keys() -> None:
    rng = np.random.default_rng(3)
    x = rand(rng, (2, 9, 4), "float32")
    r = gp.softmax(_up(x), causal=True).to_numpy()
    assert not np.isnan(r).any()
    assert (r[:, :5] == 0).all()
    assert_close(r, _ref(as64(x), causal=True), "float32")


@pytest.mark.parametrize("n", [7, 4096, 20000, 40000])
def test_all_neg_inf_rows_nan_and_inf(n: int) -> None:
    x = np.zeros((5, n), np.float32)
    x[0] = -np.inf
    x[1, 3] = np.nan
    x[2] = np.linspace(-5, 5, n, dtype=np.float32)
    x[3, :3] = -np.inf
    x[4, 1] = np.inf
    r = gp.softmax(_up(x)).to_numpy()
    assert (r[0] == 0).all()
    assert np.isnan(r[1]).all()
    assert np.isnan(r[4]).all()  # exp(inf - inf), as the reference
    assert_close(r[2:4], _ref(as64(x[2:4])), "float32")
    rc = gp.softmax(_up(np.ascontiguousarray(x.T)), axis=0).to_numpy().T  # the column kernel
    assert (rc[0] == 0).all() and np.isnan(rc[1]).all() and np.isnan(rc[4]).all()
    assert_close(rc[2:4], _ref(as64(x[2:4])), "float32")


def test_module_out_dtype() -> None:
    rng = np.random.default_rng(4)
    x = rand(rng, (4, 100), "float16")
    r = nsm.softmax(_up(x), out_dtype=np.float32)  # float16 in, float32 out: exact conversion
    assert r.dtype is gp.float32
    assert_close(r, _ref(as64(x)), "float32")
    with pytest.raises(TypeError, match="float16 result from float16 inputs only"):
        nsm.softmax(_up(x.astype(np.float32)), out_dtype=np.float16)
    with pytest.raises(ValueError, match="causal=True needs"):
        nsm.softmax(_up(x), axis=0, causal=True)
