"""Public sdpa_decode and kv_cache_write on the test device (ops._helpers.DEVICE: the NumPy
backend by default, the GPU routes with PYGPUKIT_TEST_DEVICE=cuda:0): float64 references,
contiguous and paged caches, GQA, causal alignment, argument checks."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed
from _kvcache import ref_decode, ref_rope_k, ref_write, to_paged

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up
from pygpukit.backends import cpu

ON_CPU = DEVICE == "cpu"
NUMPY_ONLY = pytest.mark.skipif(not ON_CPU, reason="the NumPy backend's host-side checks")
# sdpa_decode in float64 runs on the NumPy backend only; kv_cache_write (a copy) everywhere.
DTYPES = ["float32", "float16", "bfloat16", pytest.param("float64", marks=NUMPY_ONLY)]
WRITE_DTYPES = ["float32", "float16", "bfloat16", "float64"]


def _same(a: gp.GPUArray, b: gp.GPUArray, dtype: str) -> None:
    """Bit-equal on the NumPy backend (same arithmetic); within the dtype's bound on a GPU."""
    if ON_CPU:
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    else:
        assert_close(a, as64(b.to_numpy()), dtype)


def _case(tag: tuple, dtype: str, b: int, h: int, hkv: int, sq: int, s_max: int, d: int) -> tuple:
    rng = np.random.default_rng(seed("decode", *tag, dtype))
    q = rand(rng, (b, h, sq, d), dtype)
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    return rng, q, kc, vc


@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("dtype", DTYPES)
def test_lengths(dtype: str, group: int, length: int, causal: bool, page: int | None) -> None:
    hkv, sq, d = 2, 4 if length >= 4 else 1, 16
    rng, q, kc, vc = _case(("c", group, length, causal, page), dtype, 2, hkv * group, hkv, sq,
                           length + 3, d)  # fmt: skip
    table = None
    if page is not None:
        kc, vc, table = to_paged(rng, page, kc, vc)
    lens = np.array([length, max(1, length // 3)], np.int32)
    out = poisoned(q.shape, dtype)
    bt = None if table is None else up(table)
    r = gp.sdpa_decode(up(q), up(kc), up(vc), up(lens), block_table=bt, causal=causal, out=out)
    assert r is out
    assert_close(r, ref_decode(q, kc, vc, lens, table, causal), dtype)


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_paged_equals_contiguous(dtype: str, page: int) -> None:
    rng, q, kc, vc = _case(("p", page), dtype, 3, 8, 2, 3, 130, 16)
    kp, vp, table = to_paged(rng, page, kc, vc)
    lens = np.array([130, 3, 77], np.int32)
    contiguous = gp.sdpa_decode(up(q), up(kc), up(vc), up(lens))
    paged = gp.sdpa_decode(up(q), up(kp), up(vp), up(lens), block_table=up(table))
    _same(paged, contiguous, dtype)
    assert_close(paged, ref_decode(q, kp, vp, lens, table, True), dtype)


def test_views_scale_and_empty_rows() -> None:
    # q token-major [B, Sq, H, D] viewed as [B, H, Sq, D]; lengths shorter than Sq (causal rows
    # that see no key are zero) and a zero length (all zeros).
    rng = np.random.default_rng(5)
    b, h, hkv, sq, d = 3, 4, 2, 5, 8
    qt = rand(rng, (b, sq, h, d), "float32")
    kc, vc = rand(rng, (b, hkv, 9, d), "float32"), rand(rng, (b, hkv, 9, d), "float32")
    lens = np.array([3, 0, 9], np.int32)
    qv = up(qt).transpose(0, 2, 1, 3)
    assert not qv.is_contiguous()
    q = qt.transpose(0, 2, 1, 3)
    r = gp.sdpa_decode(qv, up(kc), up(vc), up(lens), scale=0.3).to_numpy()
    assert_close(r, ref_decode(q, kc, vc, lens, None, True, 0.3), "float32")
    assert (r[0, :, :2] == 0).all() and (r[1] == 0).all()
    r = gp.sdpa_decode(qv, up(kc), up(vc), up(lens), causal=False)
    assert_close(r, ref_decode(q, kc, vc, lens, None, False), "float32")


@NUMPY_ONLY
def test_numpy_backend_rejects_bad_lengths_and_blocks() -> None:
    rng, q, kc, vc = _case(("bad",), "float32", 2, 2, 1, 1, 8, 4)
    with pytest.raises(IndexError, match=r"lengths must lie in \[0, 8\]"):
        gp.sdpa_decode(up(q), up(kc), up(vc), up(np.array([9, 1], np.int32)))
    kp, _, table = to_paged(rng, 4, kc, vc)
    table[1, 0] = kp.shape[0]
    with pytest.raises(IndexError, match="block_table row 1 names blocks"):
        gp.sdpa_decode(up(q), up(kp), up(kp), up(np.array([2, 2], np.int32)),
                       block_table=up(table))  # fmt: skip


def test_sdpa_decode_errors() -> None:
    f32 = lambda *s: up(np.ones(s, np.float32))  # noqa: E731
    i32 = lambda *s: up(np.ones(s, np.int32))  # noqa: E731
    q, kc, lens = f32(2, 6, 1, 8), f32(2, 2, 5, 8), i32(2)
    with pytest.raises(ValueError, match=r"sdpa_decode: q must be \[B, H, Sq, D\]"):
        gp.sdpa_decode(f32(6, 1, 8), kc, kc, lens)
    with pytest.raises(ValueError, match="k_cache has 4 heads, which must divide q's 6"):
        gp.sdpa_decode(q, f32(2, 4, 5, 8), f32(2, 4, 5, 8), lens)
    with pytest.raises(ValueError, match="k_cache has head dim 4 but q has 8"):
        gp.sdpa_decode(q, f32(2, 2, 5, 4), f32(2, 2, 5, 4), lens)
    with pytest.raises(ValueError, match=r"v_cache has shape .* but k_cache has"):
        gp.sdpa_decode(q, kc, f32(2, 2, 6, 8), lens)
    with pytest.raises(TypeError, match=r"k_cache has .* dtype float16 but q has dtype float32"):
        h = kc.astype("float16")
        gp.sdpa_decode(q, h, h, lens)
    with pytest.raises(TypeError, match="cache_seqlens must be an int32 array"):
        gp.sdpa_decode(q, kc, kc, lens.astype("int64"))
    with pytest.raises(ValueError, match=r"cache_seqlens has shape \(3,\) .* must have shape"):
        gp.sdpa_decode(q, kc, kc, i32(3))
    with pytest.raises(ValueError, match="batch 3 differs from 2"):
        gp.sdpa_decode(q, f32(3, 2, 5, 8), f32(3, 2, 5, 8), lens)
    with pytest.raises(TypeError, match="block_table must be an int32 array"):
        gp.sdpa_decode(q, kc, kc, lens, block_table=f32(2, 3))
    with pytest.raises(ValueError, match=r"block_table has shape \(3, 2\)"):
        gp.sdpa_decode(q, kc, kc, lens, block_table=i32(3, 2))
    with pytest.raises(ValueError, match=r"block_table has shape \(2, 0\)"):
        gp.sdpa_decode(q, kc, kc, lens, block_table=i32(2, 0))
    with pytest.raises(TypeError, match="scale must be a number"):
        gp.sdpa_decode(q, kc, kc, lens, scale="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"out has shape \(2, 6, 2, 8\)"):
        gp.sdpa_decode(q, kc, kc, lens, out=f32(2, 6, 2, 8))
    with pytest.raises(TypeError, match="cache_seqlens must be a GPUArray"):
        gp.sdpa_decode(q, kc, kc, np.ones(2, np.int32))  # type: ignore[arg-type]


# ----- kv_cache_write -----------------------------------------------------------------------


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("dtype", WRITE_DTYPES)
def test_write(dtype: str, paged: bool) -> None:
    rng = np.random.default_rng(seed("write", dtype, paged))
    b, hkv, sq, s_max, d = 3, 2, 4, 40, 12
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype), rand(rng, (b, hkv, sq, d), dtype)
    start = np.array([0, 13, s_max - sq], np.int32)
    table = None
    if paged:
        kc, vc, table = to_paged(rng, 8, kc, vc)
    dk, dv = up(kc), up(vc)
    bt = None if table is None else up(table)
    assert gp.kv_cache_write(dk, dv, up(k), up(v), up(start), block_table=bt) is None
    np.testing.assert_array_equal(as64(dk.to_numpy()), ref_write(kc, k, start, table))
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))


@pytest.mark.parametrize("rdim", [12, 8])
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", WRITE_DTYPES)
def test_write_with_rope(dtype: str, style: str, rdim: int) -> None:
    rng = np.random.default_rng(seed("write-rope", dtype, style, rdim))
    b, hkv, sq, s_max, d = 2, 3, 3, 20, 12
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype), rand(rng, (b, hkv, sq, d), dtype)
    start = np.array([5, 17], np.int32)
    cos, sin = cpu.rope_tables(32, rdim, base=100.0)
    dk, dv = up(kc), up(vc)
    gp.kv_cache_write(dk, dv, up(k), up(v), up(start), cos=up(cos), sin=up(sin),
                      rope_style=style)  # fmt: skip
    pos = start[:, None] + np.arange(sq)
    rot = np.concatenate([ref_rope_k(k[..., :rdim], pos, cos, sin, style), as64(k[..., rdim:])],
                         axis=-1)  # fmt: skip
    assert_close(dk, ref_write(kc, rot, start), dtype)
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start))
    # q of the same tokens (2 heads per kv head, a head-major view of a token-major buffer)
    # rotated in place, with gp.rope's bits; the caches as before.
    q = rand(rng, (b, sq, 2 * hkv, d), dtype)
    dq = up(q)
    dk, dv = up(kc), up(vc)
    gp.kv_cache_write(dk, dv, up(k), up(v), up(start), cos=up(cos), sin=up(sin),
                      rope_style=style, q=dq.transpose(0, 2, 1, 3))  # fmt: skip
    want = gp.rope(up(q), up(cos), up(sin), up(pos), style=style, rotary_dim=rdim)
    np.testing.assert_array_equal(dq.to_numpy(), want.to_numpy())
    assert_close(dk, ref_write(kc, rot, start), dtype)


@NUMPY_ONLY
def test_write_numpy_backend_rejects_out_of_range() -> None:
    kc = up(np.zeros((2, 1, 6, 4), np.float32))
    k = up(np.ones((2, 1, 2, 4), np.float32))
    with pytest.raises(IndexError, match=r"sequence 1 writes positions 5\.\.6 but the cache"):
        gp.kv_cache_write(kc, kc, k, k, up(np.array([0, 5], np.int32)))


def test_write_errors() -> None:
    f32 = lambda *s: up(np.ones(s, np.float32))  # noqa: E731
    i32 = lambda *s: up(np.zeros(s, np.int32))  # noqa: E731
    kc, k, pos = f32(2, 2, 8, 4), f32(2, 2, 1, 4), i32(2)
    with pytest.raises(ValueError, match=r"k has shape .* but k_cache has .* heads"):
        gp.kv_cache_write(kc, kc, f32(2, 1, 1, 4), f32(2, 1, 1, 4), pos)
    with pytest.raises(TypeError, match=r"k has .* float16 but the caches have dtype float32"):
        h = k.astype("float16")
        gp.kv_cache_write(kc, kc, h, h, pos)
    with pytest.raises(ValueError, match=r"v has shape .* but k has"):
        gp.kv_cache_write(kc, kc, k, f32(2, 2, 2, 4), pos)
    with pytest.raises(ValueError, match="k has 9 new tokens but the cache holds 8"):
        gp.kv_cache_write(kc, kc, f32(2, 2, 9, 4), f32(2, 2, 9, 4), pos)
    with pytest.raises(TypeError, match="positions must be an int32 array"):
        gp.kv_cache_write(kc, kc, k, k, pos.astype("int64"))
    with pytest.raises(ValueError, match="rope_style must be one of"):
        gp.kv_cache_write(kc, kc, k, k, pos, rope_style="half")
    cos = f32(8, 2)
    with pytest.raises(ValueError, match="pass both cos and sin"):
        gp.kv_cache_write(kc, kc, k, k, pos, cos=cos)
    with pytest.raises(ValueError, match=r"cos has shape \(8, 3\) .* rotary_dim // 2"):
        gp.kv_cache_write(kc, kc, k, k, pos, cos=f32(8, 3), sin=f32(8, 3))
    with pytest.raises(ValueError, match=r"sin has shape \(4, 2\) but cos has shape \(8, 2\)"):
        gp.kv_cache_write(kc, kc, k, k, pos, cos=cos, sin=f32(4, 2))
    with pytest.raises(ValueError, match=r"cos has .*\(0, 2\).*: the tables cover no position"):
        gp.kv_cache_write(kc, kc, k, k, pos, cos=f32(0, 2), sin=f32(0, 2))
    q = f32(2, 4, 1, 4)
    with pytest.raises(ValueError, match="q is rotated with the tables: pass cos and sin"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=q)
    tabs = {"cos": cos, "sin": f32(8, 2)}
    with pytest.raises(ValueError, match=r"q has shape \(2, 4, 2, 4\) .* must be \[2, H, 1, 4\]"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=f32(2, 4, 2, 4), **tabs)
    with pytest.raises(ValueError, match="q has 3 heads; it must be a positive multiple of k's 2"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=f32(2, 3, 1, 4), **tabs)
    with pytest.raises(TypeError, match=r"q has .*float16 but the caches have dtype float32"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=q.astype("float16"), **tabs)
    with pytest.raises(ValueError, match="q shares elements with k_cache"):
        gp.kv_cache_write(kc, f32(2, 2, 8, 4), k, k, pos, q=kc[:, :, :1], **tabs)
    with pytest.raises(ValueError, match="q shares elements with k"):
        gp.kv_cache_write(kc, f32(2, 2, 8, 4), k, f32(2, 2, 1, 4), pos, q=k, **tabs)
    # q, k and v as column slices of one projection buffer [B, Sq, (H + 2 Hkv) D]: accepted
    # side by side, refused where q's columns run into k's.
    proj = f32(2, 1, 32)
    heads = lambda c0, h: proj[:, :, c0 : c0 + 4 * h].reshape(2, 1, h, 4).transpose(0, 2, 1, 3)  # noqa: E731
    kc2 = f32(2, 2, 8, 4)
    gp.kv_cache_write(kc2, f32(2, 2, 8, 4), heads(16, 2), heads(24, 2), pos, q=heads(0, 4), **tabs)
    with pytest.raises(ValueError, match="q shares elements with k"):
        gp.kv_cache_write(kc2, f32(2, 2, 8, 4), heads(14, 2), heads(24, 2), pos, q=heads(0, 4),
                          **tabs)  # fmt: skip
    with pytest.raises(ValueError, match="q shares elements with cos"):
        cs = f32(2, 2, 1, 4)
        gp.kv_cache_write(kc, kc2, k, k, pos, q=cs, cos=cs.reshape(8, 2), sin=tabs["sin"])
    with pytest.raises(ValueError, match="q has 2 heads; it must be a positive multiple of k's 0"):
        gp.kv_cache_write(f32(2, 0, 8, 4), f32(2, 0, 8, 4), f32(2, 0, 1, 4), f32(2, 0, 1, 4),
                          pos, q=f32(2, 2, 1, 4), **tabs)  # fmt: skip
    with pytest.raises(ValueError, match=r"block_table has shape \(1, 2\)"):
        gp.kv_cache_write(kc, kc, k, k, pos, block_table=i32(1, 2))
    # the order of the checks: positions before the rotation's, q's type before its tables
    with pytest.raises(TypeError, match="positions must be an int32 array"):
        gp.kv_cache_write(kc, kc, k, k, pos.astype("int64"), rope_style="half")
    with pytest.raises(TypeError, match="q must be a GPUArray"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=np.ones((2, 4, 1, 4)))  # type: ignore[arg-type]


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", WRITE_DTYPES)
def test_write_with_head_norms(dtype: str, style: str) -> None:
    """q_norm / k_norm: the same as gp.rmsnorm of q and k over the head, then kv_cache_write
    with the rotation (bit-equal on the NumPy backend; on a GPU the norm's sum runs in another
    order: within the dtype's bound). Forcing the native twin, which does not normalise, is
    refused with the reason."""
    rng = np.random.default_rng(seed("write-norms", dtype, style))
    b, hkv, sq, s_max, d = 2, 2, 3, 20, 16
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype) * 2, rand(rng, (b, hkv, sq, d), dtype)
    q = rand(rng, (b, sq, 4 * hkv, d), dtype)
    qw, kw = rand(rng, d, dtype), rand(rng, d, dtype)
    start = np.array([5, 17], np.int32)
    cos, sin = cpu.rope_tables(32, d, base=100.0)
    tabs = {"cos": up(cos), "sin": up(sin), "rope_style": style}
    dk, dv, dq = up(kc), up(vc), up(q)
    gp.kv_cache_write(dk, dv, up(k), up(v), up(start), q=dq.transpose(0, 2, 1, 3),
                      q_norm=up(qw), k_norm=up(kw), norm_eps=1e-5, **tabs)  # fmt: skip
    ek, ev, eq = up(kc), up(vc), gp.rmsnorm(up(q), up(qw), 1e-5)
    gp.kv_cache_write(ek, ev, gp.rmsnorm(up(k), up(kw), 1e-5), up(v), up(start),
                      q=eq.transpose(0, 2, 1, 3), **tabs)  # fmt: skip
    _same(dk, ek, dtype)
    _same(dq, eq, dtype)
    np.testing.assert_array_equal(dv.to_numpy(), ev.to_numpy())
    with gp.route(kv_cache_write="native"), pytest.raises(Exception, match="qk_norm"):
        gp.kv_cache_write(dk, dv, up(k), up(v), up(start), k_norm=up(kw), **tabs)


def test_write_head_norm_errors() -> None:
    f32 = lambda *s: up(np.ones(s, np.float32))  # noqa: E731
    kc, k, pos, w = f32(2, 2, 8, 4), f32(2, 2, 1, 4), up(np.zeros(2, np.int32)), f32(4)
    tabs = {"cos": f32(8, 2), "sin": f32(8, 2)}
    with pytest.raises(ValueError, match=r"q_norm / k_norm need cos and sin over the whole head"):
        gp.kv_cache_write(kc, kc, k, k, pos, k_norm=w)
    with pytest.raises(ValueError, match=r"over the whole head \(rotary_dim == 4\)"):
        gp.kv_cache_write(kc, kc, k, k, pos, k_norm=w, cos=f32(8, 1), sin=f32(8, 1))
    with pytest.raises(ValueError, match="q_norm normalises q: pass q with it"):
        gp.kv_cache_write(kc, kc, k, k, pos, q_norm=w, **tabs)
    with pytest.raises(ValueError, match=r"k_norm has shape \(3,\) .* but must be \[4\]"):
        gp.kv_cache_write(kc, kc, k, k, pos, k_norm=f32(3), **tabs)
    with pytest.raises(TypeError, match="k_norm must be a GPUArray"):
        gp.kv_cache_write(kc, kc, k, k, pos, k_norm=np.ones(4), **tabs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kv_cache_write: eps must be a non-negative number"):
        gp.kv_cache_write(kc, kc, k, k, pos, k_norm=w, norm_eps=-1.0, **tabs)
    q = f32(2, 4, 1, 4)
    with pytest.raises(ValueError, match="q shares elements with q_norm"):
        gp.kv_cache_write(kc, kc, k, k, pos, q=q, q_norm=q[0, 0, 0], **tabs)
    with pytest.raises(ValueError, match="v_cache shares elements with k_norm"):
        vc = f32(2, 2, 8, 4)
        gp.kv_cache_write(kc, vc, k, k, pos, k_norm=vc[0, 0, 0], **tabs)


# ----- sdpa_decode_append -------------------------------------------------------------------


@pytest.mark.parametrize("norms", [False, True], ids=["plain", "head-norms"])
@pytest.mark.parametrize("style", [None, "neox", "gptj"])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_append_equals_write_then_decode(dtype: str, paged: bool, style: str | None,
                                         norms: bool) -> None:  # fmt: skip
    """gp.sdpa_decode_append against gp.kv_cache_write at cache_seqlens - Sq with q rotated in
    place, then gp.sdpa_decode: the same caches and output (bit-equal on the NumPy backend and
    without head norms; with them within the dtype's bound on a GPU), the caller's q
    unchanged, and the float64 reference of the whole."""
    if norms and style is None:
        pytest.skip("head norms need the tables")
    rng, q, kc, vc = _case(("append", paged, style, norms), dtype, 3, 6, 2, 3, 40, 16)
    k, v = rand(rng, (3, 2, 3, 16), dtype) * 2, rand(rng, (3, 2, 3, 16), dtype)
    table = None
    if paged:
        kc, vc, table = to_paged(rng, 8, kc, vc)
    lens = np.array([3, 20, 40], np.int32)
    cos, sin = cpu.rope_tables(48, 16 if norms else 12, base=100.0)
    kw: dict = {} if style is None else {"cos": up(cos), "sin": up(sin), "rope_style": style}
    if norms:
        qw, kw_ = (1 + rand(rng, 16, dtype) / 4), (1 + rand(rng, 16, dtype) / 4)
        kw |= {"q_norm": up(qw.astype(q.dtype)), "k_norm": up(kw_.astype(q.dtype)),
               "norm_eps": 1e-5}  # fmt: skip
    bt = None if table is None else up(table)
    dq, dk, dv = up(q), up(kc), up(vc)
    got = gp.sdpa_decode_append(dq, dk, dv, up(k), up(v), up(lens), block_table=bt, **kw)
    np.testing.assert_array_equal(dq.to_numpy(), q)
    eq, ek, ev = up(q), up(kc), up(vc)
    start = up((lens - 3).astype(np.int32))
    gp.kv_cache_write(ek, ev, up(k), up(v), start, block_table=bt,
                      q=eq if style is not None else None, **kw)  # fmt: skip
    want = gp.sdpa_decode(eq, ek, ev, up(lens), block_table=bt)
    np.testing.assert_array_equal(dv.to_numpy(), ev.to_numpy())
    if norms:
        _same(dk, ek, dtype)
        _same(got, want, dtype)
    else:
        np.testing.assert_array_equal(dk.to_numpy(), ek.to_numpy())
        if ON_CPU:
            np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
        else:
            assert_close(got, as64(want.to_numpy()), dtype)
    if not norms:
        pos = lens[:, None] - 3 + np.arange(3)
        knew, qr = as64(k), as64(q)
        if style is not None:
            knew[..., :12] = ref_rope_k(k[..., :12], pos, cos, sin, style)
            qr[..., :12] = ref_rope_k(q[..., :12], pos, cos, sin, style)
        kref = ref_write(kc, knew, (lens - 3).astype(np.int32), table)
        vref = ref_write(vc, v, (lens - 3).astype(np.int32), table)
        assert_close(got, ref_decode(qr, kref, vref, lens, table, True), dtype)


@NUMPY_ONLY
def test_append_numpy_backend_rejects_out_of_range() -> None:
    kc = up(np.zeros((2, 1, 6, 4), np.float32))
    k, q = up(np.ones((2, 1, 2, 4), np.float32)), up(np.ones((2, 2, 2, 4), np.float32))
    with pytest.raises(IndexError, match=r"lengths must lie in \[0, 6\]"):
        gp.sdpa_decode_append(q, kc, up(np.zeros((2, 1, 6, 4), np.float32)), k, k,
                              up(np.array([2, 7], np.int32)))  # fmt: skip
    with pytest.raises(IndexError, match=r"sequence 1 writes positions -1\.\.0"):
        gp.sdpa_decode_append(q, kc, up(np.zeros((2, 1, 6, 4), np.float32)), k, k,
                              up(np.array([2, 1], np.int32)))  # fmt: skip


def test_append_errors() -> None:
    f32 = lambda *s: up(np.ones(s, np.float32))  # noqa: E731
    kc, vc, k, q = f32(2, 2, 8, 4), f32(2, 2, 8, 4), f32(2, 2, 1, 4), f32(2, 4, 1, 4)
    lens = up(np.ones(2, np.int32))
    with pytest.raises(ValueError, match=r"sdpa_decode_append: k has shape .* but k_cache has"):
        gp.sdpa_decode_append(q, kc, vc, f32(2, 1, 1, 4), f32(2, 1, 1, 4), lens)
    with pytest.raises(ValueError, match=r"q has shape \(2, 4, 2, 4\) .* must be \[2, H, 1, 4\]"):
        gp.sdpa_decode_append(f32(2, 4, 2, 4), kc, vc, k, k, lens)
    with pytest.raises(ValueError, match="q has 3 heads; it must be a positive multiple of k's 2"):
        gp.sdpa_decode_append(f32(2, 3, 1, 4), kc, vc, k, k, lens)
    with pytest.raises(TypeError, match="q must be a GPUArray"):
        gp.sdpa_decode_append(np.ones((2, 4, 1, 4)), kc, vc, k, k, lens)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache_seqlens must be an int32 array"):
        gp.sdpa_decode_append(q, kc, vc, k, k, up(np.ones(2, np.int64)))
    with pytest.raises(ValueError, match=r"cache_seqlens has shape \(3,\)"):
        gp.sdpa_decode_append(q, kc, vc, k, k, up(np.ones(3, np.int32)))
    big, v4, k4, q4 = f32(2, 4, 8, 4), f32(2, 4, 8, 4), f32(2, 4, 1, 4), f32(2, 4, 1, 4)
    with pytest.raises(ValueError, match="q shares elements with k_cache, which the launch"):
        gp.sdpa_decode_append(big[:, :, :1], big, v4, k4, k4, lens)
    with pytest.raises(ValueError, match="k shares elements with v_cache, which the launch"):
        gp.sdpa_decode_append(q4, big, v4, v4[:, :, 2:3], k4, lens)
    with pytest.raises(ValueError, match="out shares elements with k_cache, which the launch"):
        gp.sdpa_decode_append(q4, big, v4, k4, k4, lens, out=big[:, :, 1:2])
    with pytest.raises(ValueError, match="out shares elements with k, which the launch reads"):
        gp.sdpa_decode_append(q4, big, v4, k4, f32(2, 4, 1, 4), lens, out=k4)
    wide = f32(2, 5, 1, 4)
    with pytest.raises(ValueError, match="out shares elements with q, which the launch reads"):
        gp.sdpa_decode_append(wide[:, :4], big, v4, k4, k4, lens, out=wide[:, 1:])
    with pytest.raises(ValueError, match="pass both cos and sin"):
        gp.sdpa_decode_append(q, kc, vc, k, k, lens, cos=f32(8, 2))
    with pytest.raises(ValueError, match="q_norm / k_norm need cos and sin over the whole head"):
        gp.sdpa_decode_append(q, kc, vc, k, k, lens, k_norm=f32(4))
    with pytest.raises(ValueError, match="rope_style must be one of"):
        gp.sdpa_decode_append(q, kc, vc, k, k, lens, rope_style="half")
    with pytest.raises(TypeError, match="scale must be a number or None"):
        gp.sdpa_decode_append(q, kc, vc, k, k, lens, scale="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"out has shape"):
        gp.sdpa_decode_append(q, kc, vc, k, k, lens, out=f32(2, 4, 2, 4))


@pytest.mark.skipif(ON_CPU, reason="the native twin runs on a GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_append_native_twin(dtype: str) -> None:
    """ROUTE=sdpa_decode_append:native (the native write, then the native attention) against
    the Triton one launch: caches and output within the dtype's bound, q unchanged; head norms
    refused there with the reason."""
    rng, q, kc, vc = _case(("append-native",), dtype, 2, 8, 2, 2, 64, 64)
    k, v = rand(rng, (2, 2, 2, 64), dtype), rand(rng, (2, 2, 2, 64), dtype)
    lens = up(np.array([5, 64], np.int32))
    cos, sin = cpu.rope_tables(64, 64, base=100.0)
    tabs = {"cos": up(cos), "sin": up(sin)}
    res = []
    for backend in ("triton", "native"):
        dq, dk, dv = up(q), up(kc), up(vc)
        with gp.route(sdpa_decode_append=backend):
            o = gp.sdpa_decode_append(dq, dk, dv, up(k), up(v), lens, **tabs)
        np.testing.assert_array_equal(dq.to_numpy(), q)
        res.append((o, dk, dv))
    for a, b in zip(res[0], res[1], strict=True):
        assert_close(b, as64(a.to_numpy()), dtype)
    # a length past the cache: NaN and nothing of that row written, in both backends
    bad = up(np.array([5, 65], np.int32))
    for backend in ("triton", "native"):
        dk, dv = up(kc), up(vc)
        with gp.route(sdpa_decode_append=backend):
            o = gp.sdpa_decode_append(up(q), dk, dv, up(k), up(v), bad, **tabs).to_numpy()
        assert np.isnan(o[1]).all() and not np.isnan(o[0]).any(), backend
        np.testing.assert_array_equal(dk.to_numpy()[1], kc[1], err_msg=backend)
        np.testing.assert_array_equal(dv.to_numpy()[1], vc[1], err_msg=backend)
    with gp.route(sdpa_decode_append="native"), pytest.raises(Exception, match="qk_norm"):
        gp.sdpa_decode_append(up(q), up(kc), up(vc), up(k), up(v), lens,
                              k_norm=up(np.ones(64, q.dtype)), **tabs)  # fmt: skip
