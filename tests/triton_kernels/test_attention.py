"""Triton sdpa (flash-attention forward) against a float64 NumPy reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS, GPU, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.triton_kernels.attention import _sdpa, sdpa


def _ref(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float | None = None
) -> np.ndarray:
    """float64 attention: query head h reads kv head h // (H // Hkv); query i sees keys
    j <= i + Sk - Sq when causal; a row that sees no key is zero."""
    q, k, v = as64(q), as64(k), as64(v)
    group = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    sq, sk = q.shape[-2], k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    vis = np.ones((sq, sk), bool)
    if causal:
        vis = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.where(vis, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    return (e / np.where(den > 0, den, 1.0)) @ v  # type: ignore[no-any-return]


def _qkv(
    tag: tuple, dtype: str, b: int | None, h: int, hkv: int, sq: int, sk: int, d: int
) -> tuple:
    rng = np.random.default_rng(seed(*tag))
    lead = () if b is None else (b,)
    return (
        rand(rng, (*lead, h, sq, d), dtype),
        rand(rng, (*lead, hkv, sk, d), dtype),
        rand(rng, (*lead, hkv, sk, d), dtype),
    )


GROUPS = [1, 4, pytest.param(8, marks=GPU)]
HEAD_DIMS = [64, 128, pytest.param(80, marks=GPU)]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("extra", [0, 19], ids=["sk=sq", "sk=sq+19"])
@pytest.mark.parametrize("sq", [1, 7, 33])
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa(device: str, dtype: str, group: int, sq: int, extra: int, causal: bool) -> None:
    hkv = 2
    q, k, v = _qkv(("sdpa", dtype, group, sq, extra, causal), dtype, 2, hkv * group, hkv, sq,
                   sq + extra, 64)  # fmt: skip
    o = sdpa(up(q, device), up(k, device), up(v, device), causal=causal)
    assert o.dtype is gp.as_dtype(dtype) and o.shape == q.shape
    assert_close(o, _ref(q, k, v, causal), dtype)


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_head_dims(device: str, dtype: str, d: int) -> None:
    q, k, v = _qkv(("dims", dtype, d), dtype, 1, 4, 2, 7, 26, d)
    o = sdpa(up(q, device), up(k, device), up(v, device), causal=True, scale=0.3)
    assert_close(o, _ref(q, k, v, True, 0.3), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_3d_cache_views_and_out(device: str, dtype: str) -> None:
    """[H, S, D] with k/v slices of a longer cache, q a transposed view, poisoned out= buffers."""
    rng = np.random.default_rng(seed("views", dtype))
    h, hkv, sq, sk, max_seq, d = 4, 2, 5, 23, 40, 64
    q = rand(rng, (h, sq, d), dtype)
    kc, vc = rand(rng, (hkv, max_seq, d), dtype), rand(rng, (hkv, max_seq, d), dtype)
    k, v = kc[:, :sk], vc[:, :sk]
    qd = up(np.swapaxes(q, 0, 1), device).swapaxes(0, 1)  # [S, H, D] memory, as a [H, S, D] view
    kd, vd = up(kc, device)[:, :sk], up(vc, device)[:, :sk]
    assert not (qd.is_contiguous() or kd.is_contiguous())
    ref = _ref(q, k, v, True)
    out = poisoned(ref.shape, dtype, device)
    assert sdpa(qd, kd, vd, causal=True, out=out) is out
    assert_close(out, ref, dtype)
    out2 = poisoned_strided(ref.shape, dtype, device)
    assert sdpa(qd, kd, vd, causal=True, out=out2) is out2
    assert_close(out2, ref, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_4d_cache_slice(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("cache4", dtype))
    b, h, hkv, sq, sk, max_seq, d = 2, 8, 2, 70, 150, 160, 64  # several tiles and key blocks
    q = rand(rng, (b, h, sq, d), dtype)
    kc, vc = rand(rng, (b, hkv, max_seq, d), dtype), rand(rng, (b, hkv, max_seq, d), dtype)
    o = sdpa(up(q, device), up(kc, device)[:, :, :sk], up(vc, device)[:, :, :sk], causal=True)
    assert_close(o, _ref(q, kc[:, :, :sk], vc[:, :, :sk], True), dtype)


@pytest.mark.parametrize("splits", [2, 3])
@pytest.mark.parametrize("sq", [1, 7])
@pytest.mark.parametrize("dtype", FLOATS)
def test_split_keys(device: str, dtype: str, sq: int, splits: int) -> None:
    """The flash-decoding path (keys split over programs, then combined), forced."""
    q, k, v = _qkv(("split", dtype, sq, splits), dtype, 1, 4, 1, sq, 150, 64)
    for causal in (True, False):
        out = poisoned(q.shape, dtype, device)
        args = (up(q, device), up(k, device), up(v, device))
        _sdpa(*args, causal=causal, scale=None, out=out, num_splits=splits)
        assert_close(out, _ref(q, k, v, causal), dtype)


def test_fewer_keys_than_queries(device: str) -> None:
    """Sk < Sq with the causal mask: the first Sq - Sk rows see no key and are zero."""
    q, k, v = _qkv(("short",), "float32", 1, 2, 1, 9, 4, 64)
    out = poisoned(q.shape, "float32", device)
    sdpa(up(q, device), up(k, device), up(v, device), causal=True, out=out)
    o = out.to_numpy()
    assert np.all(o[:, :, :5] == 0.0)
    assert_close(o, _ref(q, k, v, True), "float32")


def test_float64_rejected(device: str) -> None:
    q = up(np.ones((1, 2, 16), np.float64), device)
    with pytest.raises(TypeError, match="dtype float64 is not supported"):
        sdpa(q, q, q)


@GPU
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_larger_shapes(device: str, dtype: str) -> None:
    """Sizes that span several query tiles and key blocks (prefill) and a long-cache decode."""
    for b, h, hkv, sq, sk, d in [(2, 8, 2, 300, 300, 128), (1, 4, 4, 129, 400, 256),
                                 (3, 32, 8, 1, 1000, 128)]:  # fmt: skip
        q, k, v = _qkv(("large", dtype, sq, d), dtype, b, h, hkv, sq, sk, d)
        o = sdpa(up(q, device), up(k, device), up(v, device), causal=True)
        assert_close(o, _ref(q, k, v, True), dtype)


@GPU
def test_routed_from_gp_sdpa(device: str) -> None:
    q, k, v = _qkv(("routed",), "float16", 1, 8, 2, 7, 30, 64)
    o = gp.sdpa(up(q, device), up(k, device), up(v, device))
    assert_close(o, _ref(q, k, v, True), "float16")
