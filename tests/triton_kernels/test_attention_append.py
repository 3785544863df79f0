"""Triton sdpa_decode_append (the cache write and decode attention in one launch) against the two
launches it replaces (kv_cache_write, then sdpa_decode) and against float64 references; the
interpreter runs the fp32 cases at small sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _kvcache import ref_decode, ref_rope_k, ref_write, to_paged
from _tkutil import FLOATS, GPU, poisoned, up

from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import attention_decode as ad


def _case(tag: tuple, dtype: str, b: int, hkv: int, group: int, sq: int, s_max: int, d: int,
          page: int | None) -> tuple:  # fmt: skip
    """(q [B, H, Sq, D] as a head-major view of a token-major buffer's layout, caches, block
    table or None, k, v [B, Hkv, Sq, D])."""
    rng = np.random.default_rng(seed(*tag, dtype))
    q = rand(rng, (b, sq, hkv * group, d), dtype).transpose(0, 2, 1, 3)
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype) * 2, rand(rng, (b, hkv, sq, d), dtype)
    table = None
    if page is not None:
        kc, vc, table = to_paged(rng, page, kc, vc)
    return q, kc, vc, table, k, v


def _both(device: str, q: Any, kc: Any, vc: Any, table: Any, k: Any, v: Any, lens: Any,
          tabs: tuple, rope: str, norms: tuple, splits: int | None) -> tuple:  # fmt: skip
    """(output, k cache, v cache, q after) of the one launch, then of the two launches, on
    copies of the same inputs."""
    res = []
    for one in (True, False):
        dq, dk, dv = (
            up(np.ascontiguousarray(q.transpose(0, 2, 1, 3)), device),
            up(kc, device),
            up(vc, device),
        )
        qh = dq.transpose(0, 2, 1, 3)
        bt = None if table is None else up(table, device)
        dl = up(lens, device)
        dtabs = tuple(up(t, device) for t in tabs) if tabs else (None, None)
        qn, kn = (up(w, device) for w in norms) if norms else (None, None)
        dkn, dvn = up(k, device), up(v, device)
        if one:
            app = ad.Append(dkn, dvn, *dtabs, qn, kn, 1e-5, rope == "gptj")
            o = ad._sdpa_decode(qh, dk, dv, dl, bt, True, None, None, num_splits=splits,
                                append=app)  # fmt: skip
        else:
            start = up((lens - q.shape[2]).astype(np.int32), device)
            ad.kv_cache_write(dk, dv, dkn, dvn, start, bt, *dtabs, qh if tabs else None,
                              rope_style=rope, q_norm=qn, k_norm=kn, norm_eps=1e-5)  # fmt: skip
            o = ad._sdpa_decode(qh, dk, dv, dl, bt, True, None, None, num_splits=splits)
        res.append((o.to_numpy(), dk.to_numpy(), dv.to_numpy(), qh.to_numpy()))
    return res[0], res[1]


@pytest.mark.parametrize("splits", [None, 3], ids=["plan", "3splits"])
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("rope", [None, "neox", "gptj"])
@pytest.mark.parametrize("page", [None, 8], ids=["contiguous", "paged8"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_append_equals_write_then_decode(device: str, dtype: str, page: int | None,
                                         rope: str | None, sq: int,
                                         splits: int | None) -> None:  # fmt: skip
    """The one launch against kv_cache_write + sdpa_decode: the same cache bits, the same
    output bits, q left as it was (the two launches rotate it in place); lengths 4 (every key
    new when Sq is 4), 63, 130 (Sq 4: new keys across the 64-key splits of the 3-split plan)
    and 150; partial rotary (dims 30..33 pass through)."""
    q, kc, vc, table, k, v = _case(("append", page, rope, sq, splits), dtype, 4, 2, 3, sq, 150,
                                   34, page)  # fmt: skip
    lens = np.array([4, 63, 130, 150], np.int32)
    tabs = cpu.rope_tables(160, 30, base=100.0) if rope else ()
    one, two = _both(device, q, kc, vc, table, k, v, lens, tabs, rope or "neox", (), splits)
    np.testing.assert_array_equal(one[1], two[1])
    np.testing.assert_array_equal(one[2], two[2])
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[3], q)  # untouched by the one launch
    # and the float64 reference of the whole: the write, then attention with rotated q
    pos = lens[:, None] - sq + np.arange(sq)
    knew, qr = as64(k), as64(q)
    if rope:
        knew[..., :30] = ref_rope_k(k[..., :30], pos, *tabs, rope)
        qr[..., :30] = ref_rope_k(q[..., :30], pos, *tabs, rope)
    kw = ref_write(kc, knew, (lens - sq).astype(np.int32), table)
    vw = ref_write(vc, v, (lens - sq).astype(np.int32), table)
    assert_close(one[1], kw, dtype)
    assert_close(one[0], ref_decode(qr, kw, vw, lens, table, True), dtype)


@pytest.mark.parametrize("length", [4, 130, 300])
def test_append_splits_by_the_length(device: str, length: int,
                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A 1024-slot cache whose splits follow the length (8 splits of 128 keys at capacity, 64
    at 130 keys: the new tokens 126..129 cross a split boundary only the length rule makes):
    the one launch equals the two launches bit for bit, and the reference."""
    monkeypatch.setattr(ad, "sm_count", lambda x: 16)
    monkeypatch.setattr(ad, "FEW_MIN_SPLIT_KEYS", 64)
    monkeypatch.setattr(ad, "FEW_ONE_SPLIT_KEYS", 0)
    sq = 4
    q, kc, vc, table, k, v = _case(("append-len", length), "float32", 1, 2, 3, sq, 1024, 32,
                                   None)  # fmt: skip
    pl = ad.decode_plan(1, 6, 2, sq, 32, 1024, False, 16)
    assert (pl.few, pl.splits, pl.chunk, pl.floor, pl.solo) == (True, 8, 128, 64, 0)
    lens = np.array([length], np.int32)
    tabs = cpu.rope_tables(1100, 32, base=100.0)
    one, two = _both(device, q, kc, vc, table, k, v, lens, tabs, "neox", (), None)
    for a, b in zip(one[:3], two[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    pos = lens[:, None] - sq + np.arange(sq)
    knew = ref_rope_k(k, pos, *tabs, "neox")
    kw = ref_write(kc, knew, (lens - sq).astype(np.int32), None)
    vw = ref_write(vc, v, (lens - sq).astype(np.int32), None)
    qr = ref_rope_k(q, pos, *tabs, "neox")
    assert_close(one[0], ref_decode(qr, kw, vw, lens, None, True), "float32")


@pytest.mark.parametrize("rope", ["neox", "gptj"])
@pytest.mark.parametrize("page", [None, 8], ids=["contiguous", "paged8"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_append_normalises_heads(device: str, dtype: str, page: int | None, rope: str) -> None:
    """q_norm / k_norm (Qwen3) as kv_cache_write applies them: v and the attention's inputs
    within the dtype's bound of the two launches' (a head's sum of squares may run in another
    order), the float64 reference of the whole."""
    d, sq = 32, 2
    q, kc, vc, table, k, v = _case(("append-norm", page, rope), dtype, 3, 2, 2, sq, 40, d, page)
    rng = np.random.default_rng(seed("append-norm-w", dtype))
    qw = (1 + rand(rng, d, dtype) / 4).astype(q.dtype)
    kw_ = (1 + rand(rng, d, dtype) / 4).astype(q.dtype)
    lens = np.array([2, 19, 40], np.int32)
    tabs = cpu.rope_tables(64, d, base=100.0)
    one, two = _both(device, q, kc, vc, table, k, v, lens, tabs, rope, (qw, kw_), None)
    np.testing.assert_array_equal(one[2], two[2])
    assert_close(one[1], two[1], dtype)
    assert_close(one[0], two[0], dtype)

    def normed(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        x64 = as64(x)
        y = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-5) * as64(w)
        return as64(y.astype(x.dtype))

    pos = lens[:, None] - sq + np.arange(sq)
    knew = ref_rope_k(normed(k, kw_), pos, *tabs, rope)
    qr = ref_rope_k(normed(q, qw), pos, *tabs, rope)
    kc_w = ref_write(kc, knew, (lens - sq).astype(np.int32), table)
    vc_w = ref_write(vc, v, (lens - sq).astype(np.int32), table)
    assert_close(one[1], kc_w, dtype)
    assert_close(one[0], ref_decode(qr, kc_w, vc_w, lens, table, True), dtype)


@pytest.mark.parametrize("splits", [None, 2], ids=["plan", "2splits"])
def test_append_row_tiles(device: str, splits: int | None) -> None:
    """8 query heads a kv head and 16 new tokens: 128 packed rows, two row tiles a (sequence,
    kv head), each of which writes the same new tokens of its split (the same bits) before it
    reads them; the same caches and output as the two launches."""
    q, kc, vc, table, k, v = _case(("append-tiles", splits), "float32", 2, 1, 8, 16, 96, 16, None)
    lens = np.array([16, 90], np.int32)
    tabs = cpu.rope_tables(96, 16, base=100.0)
    one, two = _both(device, q, kc, vc, table, k, v, lens, tabs, "neox", (), splits)
    for a, b in zip(one[:3], two[:3], strict=True):
        np.testing.assert_array_equal(a, b)


def test_append_norms_need_tables(device: str) -> None:
    q, kc, vc, _t, k, v = _case(("append-notab",), "float32", 1, 1, 2, 1, 8, 16, None)
    w = up(np.ones(16, np.float32), device)
    app = ad.Append(up(k, device), up(v, device), None, None, None, w, 1e-5, False)
    with pytest.raises(ValueError, match="q_norm / k_norm need the rotary tables"):
        ad._sdpa_decode(up(q, device), up(kc, device), up(vc, device),
                        up(np.array([3], np.int32), device), None, True, None, None,
                        append=app)  # fmt: skip


def test_append_out_of_range(device: str) -> None:
    """A length past the cache: that sequence's output is NaN and nothing of it is written; a
    length shorter than Sq writes only the tokens at positions >= 0; the other rows as the two
    launches compute them."""
    q, kc, vc, _t, k, v = _case(("append-oob",), "float32", 3, 1, 2, 3, 16, 16, None)
    lens = np.array([17, 2, 9], np.int32)
    tabs = cpu.rope_tables(32, 16, base=100.0)
    dk, dv = up(kc, device), up(vc, device)
    app = ad.Append(up(k, device), up(v, device), up(tabs[0], device), up(tabs[1], device),
                    None, None, 0.0, False)  # fmt: skip
    out = poisoned(q.shape, "float32", device)
    o = ad._sdpa_decode(up(q, device), dk, dv, up(lens, device), None, True, None, out,
                        append=app)  # fmt: skip
    got = o.to_numpy()
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(dk.to_numpy()[0], kc[0])
    np.testing.assert_array_equal(dv.to_numpy()[0], vc[0])
    # row 1: tokens 1 and 2 go to positions 0 and 1, token 0 (position -1) is dropped
    np.testing.assert_array_equal(dv.to_numpy()[1, :, :2], v[1, :, 1:])
    np.testing.assert_array_equal(dv.to_numpy()[1, :, 2:], vc[1, :, 2:])
    assert not np.isnan(got[2]).any()
    pos = lens[2] - 3 + np.arange(3)
    np.testing.assert_array_equal(dv.to_numpy()[2, :, pos], np.swapaxes(v[2], 0, 1))


@GPU
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gpu_append_model_shapes(device: str, dtype: str) -> None:
    """The decode step's shapes (Llama-3.2-1B: 32 q heads over 8, D 64; Qwen3-8B: D 128 with
    head norms), batch 1 and 4, at lengths across the few-programs class's splits: the same bits
    as the two launches (the norms' within the dtype's bound)."""
    for d, norms in ((64, False), (128, True)):
        for b in (1, 4):
            q, kc, vc, _t, k, v = _case(("append-gpu", d, b), dtype, b, 8, 4, 1, 512, d, None)
            lens = np.array([17, 128, 129, 500][:b], np.int32)
            tabs = cpu.rope_tables(512, d, base=10000.0)
            rng = np.random.default_rng(seed("append-gpu-w", d))
            nw = tuple((1 + rand(rng, d, dtype) / 4).astype(q.dtype) for _ in range(2))
            one, two = _both(device, q, kc, vc, None, k, v, lens, tabs, "neox",
                             nw if norms else (), None)  # fmt: skip
            np.testing.assert_array_equal(one[2], two[2])
            if norms:
                assert_close(one[1], two[1], dtype)
                assert_close(one[0], two[0], dtype)
            else:
                np.testing.assert_array_equal(one[1], two[1])
                np.testing.assert_array_equal(one[0], two[0])
