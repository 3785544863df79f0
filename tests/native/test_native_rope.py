"""Native twin of rope (neox / gptj, partial rotary_dim, device positions, in place) on the GPU:
the public ops with the route forced to native, against a float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, np_dtype, rand, seed

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import rope as nrope

pytestmark = pytest.mark.gpu
FLOATS = ["float32", "float16", "bfloat16", "float64"]


def _ref(x, cos, sin, pos, style, r):
    """Float64 rotation written from the definition (pairs by index, no slicing tricks)."""
    half = r // 2
    s = x.shape[-3]
    p = np.broadcast_to(np.arange(s) if pos is None else pos, x.shape[:-2])
    c, sn = cos[p][..., None, :], sin[p][..., None, :]  # [..., S, 1, half]
    y = x.copy()
    i = np.arange(half)
    ia, ib = (2 * i, 2 * i + 1) if style == "gptj" else (i, i + half)
    a, b = x[..., ia], x[..., ib]
    y[..., ia] = a * c - b * sn
    y[..., ib] = b * c + a * sn
    return y


def _up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


@pytest.fixture(autouse=True)
def _native() -> object:
    with gp.route("rope:native"):
        yield


CASES = [  # (x shape [..., S, H, D], rotary_dim)
    ((1, 1, 2), None),  # one pair
    ((7, 3, 16), None),  # 8 pairs: packs for every dtype (neox)
    ((7, 3, 16), 8),  # partial, tail of 8
    ((2, 5, 4, 34), 30),  # 15 pairs: the element path, tail of 4
    ((33, 2, 128), None),
    ((3, 33, 5, 66), 64),  # packs with a tail of 2 (element tail copy)
    ((2, 17, 32, 128), None),  # a model-sized head layout
]


@pytest.mark.parametrize(("shape", "rdim"), CASES, ids=str)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rope(dtype: str, style: str, shape: tuple[int, ...], rdim: int | None) -> None:
    rng = np.random.default_rng(seed("nrope", dtype, style, shape, rdim))
    r = shape[-1] if rdim is None else rdim
    cos, sin = cpu.rope_tables(97, r, base=500.0)
    x = rand(rng, shape, dtype)
    per_token = rng.integers(0, 97, shape[:-2]).astype(np.int32)
    per_s = rng.integers(0, 97, shape[-3:-2]).astype(np.int64)  # broadcast over leading dims
    for tdt in ("float32", dtype):  # float32 tables, and tables of x's dtype
        ct, st = cos.astype(np_dtype(tdt)), sin.astype(np_dtype(tdt))
        for pos in (None, per_token, per_s):
            dpos = None if pos is None else _up(pos)
            out = _poison(shape, dtype)
            xd = _up(x)
            y = gp.rope(xd, _up(ct), _up(st), dpos, style, rdim, out=out)
            assert y is out
            assert gp.routing.explain("rope", xd, style=style).backend == "native"
            ref = _ref(as64(x), as64(ct), as64(st), pos, style, r)
            where = f"tables {tdt}, pos {None if pos is None else pos.shape}"
            assert_close(y, ref, dtype, name=where)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_strided_x_out_tables_and_inplace(dtype: str, style: str) -> None:
    # q as a head slice of a fused [T, 3H, D] qkv buffer (token and head strides of the buffer).
    rng = np.random.default_rng(seed("nrope-qkv", style, dtype))
    t, h, d, r = 9, 4, 64, 48
    qkv = rand(rng, (t, 3 * h, d), dtype)
    cos, sin = cpu.rope_tables(16, r)
    pos = rng.integers(0, 16, t).astype(np.int64)
    dq = _up(qkv)
    q = dq[:, h : 2 * h]
    ref = _ref(as64(qkv[:, h : 2 * h]), as64(cos), as64(sin), pos, style, r)
    args = (_up(cos), _up(sin), _up(pos))
    out = _poison((t, h, d), dtype)
    assert gp.rope(q, *args, style, r, out=out) is out
    assert_close(out, ref, dtype)
    out2 = _poison((t, h, 2 * d), dtype)[..., ::2]  # a strided out=: through a temporary
    gp.rope(q, *args, style, r, out=out2)
    assert_close(out2, ref, dtype)
    # tables as strided views (every other column of a wider table)
    wide_c, wide_s = np.repeat(cos, 2, axis=1), np.repeat(sin, 2, axis=1)
    y = gp.rope(q, _up(wide_c)[:, ::2], _up(wide_s)[:, ::2], args[2], style, r)
    assert_close(y, ref, dtype)
    # x with a non-contiguous last dim: copied first
    wide_x = np.zeros((t, h, 2 * d), qkv.dtype)
    wide_x[..., ::2] = qkv[:, h : 2 * h]
    assert_close(gp.rope(_up(wide_x)[..., ::2], *args, style, r), ref, dtype)
    # in place on the strided slice: the rest of the buffer is untouched
    assert gp.rope_inplace(q, *args, style, r) is q
    got = dq.to_numpy()
    assert_close(got[:, h : 2 * h], ref, dtype)
    np.testing.assert_array_equal(got[:, :h], qkv[:, :h])
    np.testing.assert_array_equal(got[:, 2 * h :], qkv[:, 2 * h :])


def test_batched_window_of_a_cache() -> None:
    # x as [B, S, H, D] window of a [B, Smax, H, D] buffer: batch and token strides differ.
    rng = np.random.default_rng(7)
    big = rand(rng, (3, 20, 4, 32), "float16")
    cos, sin = cpu.rope_tables(40, 32)
    pos = rng.integers(0, 40, (3, 6)).astype(np.int32)
    x = _up(big)[:, 5:11]
    y = gp.rope(x, _up(cos), _up(sin), _up(pos))
    assert_close(y, _ref(as64(big[:, 5:11]), as64(cos), as64(sin), pos, "neox", 32), "float16")
    s_only = pos[0]  # positions [S] broadcast over the batch
    y = gp.rope(x, _up(cos), _up(sin), _up(s_only), "gptj")
    assert_close(y, _ref(as64(big[:, 5:11]), as64(cos), as64(sin), s_only, "gptj", 32), "float16")


def test_out_of_range_positions_give_nan() -> None:
    rng = np.random.default_rng(2)
    x = rand(rng, (5, 2, 8), "float32")
    cos, sin = cpu.rope_tables(10, 4)
    pos = np.array([0, 10, 3, -1, 9], np.int32)
    y = gp.rope(_up(x), _up(cos), _up(sin), _up(pos), rotary_dim=4).to_numpy()
    bad = np.isnan(y[..., :4]).all(axis=(1, 2))
    np.testing.assert_array_equal(bad, [False, True, False, True, False])
    np.testing.assert_array_equal(y[..., 4:], x[..., 4:])  # pass-through dims stay finite
    ok = (pos >= 0) & (pos < 10)
    ref = _ref(as64(x[ok]), as64(cos), as64(sin), pos[ok], "neox", 4)
    assert_close(y[ok], ref, "float32")


def test_module_table_dtypes() -> None:
    # float64 tables for a float32 x, float16 tables for a bfloat16 x: converted to the compute
    # type first (the same values the Triton kernel's loads convert to).
    rng = np.random.default_rng(5)
    x = rand(rng, (6, 2, 16), "bfloat16")
    cos, sin = cpu.rope_tables(8, 16)
    y = nrope.rope(_up(x.astype(np.float32)), _up(cos), _up(sin))
    assert_close(y, _ref(as64(x), cos, sin, None, "neox", 16), "float32")
    c16, s16 = cos.astype(np.float16), sin.astype(np.float16)
    y = nrope.rope(_up(x), _up(c16), _up(s16), style="gptj")
    assert_close(y, _ref(as64(x), as64(c16), as64(s16), None, "gptj", 16), "bfloat16")


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_rotation_bits_match_numpy_and_the_fused_cache_write(dtype: str, style: str) -> None:
    """Each product rounded on its own (rotate.cuh, no FMA contraction): float32/float64 equal
    NumPy's a * c - b * s in the same dtype bit for bit, and gp.rope followed by a plain cache
    write stores the same key bits as kv_cache_write's fused rotation (both native)."""
    rng = np.random.default_rng(seed("rope-bits", dtype, style))
    b, hkv, s, d = 2, 4, 9, 128
    k = rand(rng, (b, s, hkv, d), dtype)  # [B, S, H, D], the rope op's layout
    tdt = "float64" if dtype == "float64" else "float32"  # the compute type (the fused write's)
    cos, sin = gp.rope_tables(64, d, dtype=tdt, device="cuda:0")
    pos = np.array([3, 40], np.int64)[:, None] + np.arange(s)  # [B, S]
    ct = np_dtype(tdt)
    got = gp.rope(_up(k), cos, sin, _up(pos), style=style).to_numpy()
    if dtype != "bfloat16":
        c, sn = (
            cos.to_numpy().astype(ct)[pos][:, :, None],
            sin.to_numpy().astype(ct)[pos][:, :, None],
        )
        half = d // 2
        i = np.arange(half)
        ia, ib = (2 * i, 2 * i + 1) if style == "gptj" else (i, i + half)
        want = k.copy()
        want[..., ia] = k[..., ia] * c - k[..., ib] * sn
        want[..., ib] = k[..., ib] * c + k[..., ia] * sn
        np.testing.assert_array_equal(got, want)
    cache = gp.zeros((b, hkv, 64, d), dtype, device="cuda:0")
    vcache = gp.zeros((b, hkv, 64, d), dtype, device="cuda:0")
    kt = _up(k.transpose(0, 2, 1, 3))  # [B, Hkv, S, D]
    with gp.route("kv_cache_write:native"):
        gp.kv_cache_write(cache, vcache, kt, kt, _up(np.array([3, 40], np.int32)), cos=cos,
                          sin=sin, rope_style=style)  # fmt: skip
    fused = cache.to_numpy()
    for r, p0 in enumerate((3, 40)):
        np.testing.assert_array_equal(fused[r, :, p0 : p0 + s], got[r].transpose(1, 0, 2))
