"""Triton sdpa_decode (split-K over a contiguous or paged KV cache) and kv_cache_write (fused
RoPE) against float64 references; the interpreter runs the fp32 cases at small sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _kvcache import ref_decode, ref_rope_k, ref_write, to_paged
from _tkutil import FLOATS, FLOATS64, GPU, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import attention_decode as ad

# Lengths 1 and 17 and two longer ones (one a whole number of 64-key blocks), one varying batch.
LENS = np.array([1, 17, 128, 150], np.int32)


def _caches(tag: tuple, dtype: str, b: int, h: int, hkv: int, sq: int, s_max: int, d: int,
            page: int | None) -> tuple:  # fmt: skip
    """(q, k cache, v cache, block table or None) with the caches contiguous or paged."""
    rng = np.random.default_rng(seed(*tag, dtype))
    q = rand(rng, (b, h, sq, d), dtype)
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    if page is None:
        return q, kc, vc, None
    kp, vp, table = to_paged(rng, page, kc, vc)
    return q, kp, vp, table


def _run(device: str, q: Any, kc: Any, vc: Any, lens: Any, table: Any, causal: bool = True,
         **kw: Any) -> Any:  # fmt: skip
    out = kw.pop("out", None)
    bt = None if table is None else up(table, device)
    args = (up(q, device), up(kc, device), up(vc, device), up(lens, device), bt)
    return ad._sdpa_decode(*args, causal, kw.pop("scale", None), out, **kw)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "combine-kernel"])
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
def test_decode(device: str, page: int | None, group: int, causal: bool, sq: int,
                fused: bool) -> None:  # fmt: skip
    """Three splits of 64 keys: lengths 1 and 17 fit one chunk (direct store), 128 and 150
    combine two and three partials."""
    q, kc, vc, table = _caches(("dec", page, group, causal, sq), "float32", 4, 2 * group, 2, sq,
                               150, 32, page)  # fmt: skip
    out = poisoned(q.shape, "float32", device)
    o = _run(device, q, kc, vc, LENS, table, causal, out=out, num_splits=3, fused=fused)
    assert o is out
    assert_close(o, ref_decode(q, kc, vc, LENS, table, causal), "float32")


@pytest.mark.parametrize("page", [5, 64, 128])
def test_page_sizes(device: str, page: int) -> None:
    """Odd pages (per-key table lookups), pages of one key block and of two (one lookup)."""
    q, kc, vc, table = _caches(("pages", page), "float32", 4, 4, 2, 2, 150, 32, page)
    for ns in (None, 2):
        o = _run(device, q, kc, vc, LENS, table, num_splits=ns)
        assert_close(o, ref_decode(q, kc, vc, LENS, table, True), "float32", name=f"splits {ns}")


@pytest.mark.parametrize("d", [40, 128])
def test_head_dims_and_default_plan(device: str, d: int) -> None:
    q, kc, vc, table = _caches(("dims", d), "float32", 4, 8, 2, 3, 150, d, None)
    o = _run(device, q, kc, vc, LENS, table, scale=0.2)
    assert_close(o, ref_decode(q, kc, vc, LENS, table, True, 0.2), "float32")


@pytest.mark.parametrize("page", [16, 64])
def test_paged_equals_contiguous(device: str, page: int) -> None:
    """The same keys through a block table give the same bits (same splits and key blocks)."""
    rng = np.random.default_rng(seed("same", page))
    q = rand(rng, (4, 8, 2, 32), "float32")
    kc, vc = rand(rng, (4, 2, 192, 32), "float32"), rand(rng, (4, 2, 192, 32), "float32")
    kp, vp, table = to_paged(rng, page, kc, vc)
    for ns in (1, 3):
        a = _run(device, q, kc, vc, LENS, None, num_splits=ns).to_numpy()
        b = _run(device, q, kp, vp, LENS, table, num_splits=ns).to_numpy()
        if device == "cpu":
            np.testing.assert_array_equal(a, b)
        else:  # the same operations in the same order; a compiler may still schedule them apart
            assert_close(b, as64(a), "float32")


@pytest.mark.parametrize("one_loop", [True, False])
@pytest.mark.parametrize("sq", [1, 4])
def test_few_class_loops(
    device: str, sq: int, one_loop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FEW_ONE_LOOP: the few-programs class with every key block in the masked loop (True) or
    the unmasked blocks then the masked tail, one split and several, against float64 at lengths
    of one key, a partial block, whole blocks and several splits."""
    monkeypatch.setattr(ad, "FEW_ONE_LOOP", one_loop)
    seen: list[bool] = []
    launch = ad.launch

    def spy(kernel: Any, grid: Any, *args: Any, **c: Any) -> Any:
        seen.append(bool(c.get("ALL_MASKED")))
        return launch(kernel, grid, *args, **c)

    monkeypatch.setattr(ad, "launch", spy)
    lens = np.array([1, 17, 128, 150], np.int32)
    q, kc, vc, _ = _caches(("one-loop", sq), "float32", 4, 8, 2, sq, 160, 32, None)
    for splits in (1, 3):
        out = _run(device, q, kc, vc, lens, None, few=True, num_splits=splits)
        assert_close(out, ref_decode(q, kc, vc, lens, None, True), "float32",
                     name=f"{splits} splits")  # fmt: skip
    assert seen == [one_loop, one_loop]


def test_views_and_strided_out(device: str) -> None:
    # q token-major [B, Sq, H, D] viewed as [B, H, Sq, D]; caches that are slices of wider ones.
    rng = np.random.default_rng(seed("views"))
    qt = rand(rng, (4, 2, 4, 32), "float32")
    kw, vw = rand(rng, (4, 3, 160, 32), "float32"), rand(rng, (4, 3, 160, 32), "float32")
    qv = up(qt, device).transpose(0, 2, 1, 3)
    kv, vv = up(kw, device)[:, 1:], up(vw, device)[:, 1:]
    assert not (qv.is_contiguous() or kv.is_contiguous())
    out = poisoned_strided((4, 4, 2, 32), "float32", device)
    ad._sdpa_decode(qv, kv, vv, up(LENS, device), None, True, None, out, num_splits=3)
    ref = ref_decode(qt.transpose(0, 2, 1, 3), kw[:, 1:], vw[:, 1:], LENS, None, True)
    assert_close(out, ref, "float32")


def test_more_rows_than_a_tile(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """GROUP * Sq = 32 packed rows over tiles of 16 (two row tiles per kv head)."""
    monkeypatch.setattr(ad, "MAX_BLOCK_M", 16)
    q, kc, vc, table = _caches(("tiles",), "float32", 4, 16, 2, 4, 150, 32, 16)
    for fused in (True, False):
        o = _run(device, q, kc, vc, LENS, table, num_splits=3, fused=fused)
        assert_close(o, ref_decode(q, kc, vc, LENS, table, True), "float32")


@pytest.mark.parametrize("block_n", [16, 128])
def test_block_n_knob(device: str, block_n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ad, "BLOCK_N", block_n)
    q, kc, vc, table = _caches(("bn", block_n), "float32", 4, 8, 2, 4, 150, 32, 16)
    o = _run(device, q, kc, vc, LENS, table, num_splits=2)
    assert_close(o, ref_decode(q, kc, vc, LENS, table, True), "float32")


def test_bad_lengths_and_blocks_give_nan(device: str) -> None:
    """Out-of-range lengths and block ids cannot raise on the device: that sequence is NaN."""
    q, kc, vc, table = _caches(("bad",), "float32", 4, 4, 2, 1, 150, 32, 16)
    cap = table.shape[1] * 16
    lens = np.array([-1, cap + 1, 40, 150], np.int32)
    o = _run(device, q, kc, vc, lens, table, num_splits=2).to_numpy()
    assert np.isnan(o[:2]).all()
    assert_close(o[2:], ref_decode(q[2:], kc, vc, lens[2:], table[2:], True), "float32")
    table = table.copy()
    table[0, 1] = kc.shape[0]  # a key block of sequence 0 names a block past the cache
    table[1, 0] = -3
    lens = np.array([20, 5, 40, 150], np.int32)
    o = _run(device, q, kc, vc, lens, table, num_splits=2).to_numpy()
    assert np.isnan(o[:2]).all()
    assert_close(o[2:], ref_decode(q[2:], kc, vc, lens[2:], table[2:], True), "float32")


def test_lengths_stay_on_device(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher never reads lengths on the host, and new lengths written into the same
    device array change the next call's result (what a CUDA graph replay relies on)."""
    q, kc, vc, table = _caches(("dev",), "float32", 4, 8, 2, 4, 150, 32, 16)
    dq, dk, dv, bt = (up(t, device) for t in (q, kc, vc, table))
    lens = up(LENS, device)
    out = poisoned(q.shape, "float32", device)
    plan = ad.decode_plan(4, 8, 2, 4, 32, dk.shape[2] * bt.shape[1], False, 2)

    def no_host(*a: Any, **k: Any) -> Any:
        raise AssertionError("a device array was read on the host")

    for name in ("to_numpy", "__array__", "item", "__int__", "__index__"):
        monkeypatch.setattr(gp.GPUArray, name, no_host)
    ad.sdpa_decode(dq, dk, dv, lens, bt, out=out)
    monkeypatch.undo()
    assert_close(out, ref_decode(q, kc, vc, LENS, table, True), "float32")
    new = np.array([150, 4, 0, 99], np.int32)
    lens[:] = new  # in place: same buffer, same pointer
    ad.sdpa_decode(dq, dk, dv, lens, bt, out=out)
    assert_close(out, ref_decode(q, kc, vc, new, table, True), "float32")
    assert ad.decode_plan(4, 8, 2, 4, 32, dk.shape[2] * bt.shape[1], False, 2) == plan


# ----- kv_cache_write -----------------------------------------------------------------------


def _write_case(tag: tuple, dtype: str, page: int | None) -> tuple:
    rng = np.random.default_rng(seed(*tag, dtype))
    b, hkv, sq, s_max, d = 3, 3, 4, 40, 34
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype), rand(rng, (b, hkv, sq, d), dtype)
    table = None
    if page is not None:
        kc, vc, table = to_paged(rng, page, kc, vc)
    return kc, vc, k, v, np.array([0, 13, s_max - sq], np.int32), table


@pytest.mark.parametrize("rope", [None, "neox", "gptj"])
@pytest.mark.parametrize("page", [None, 8, 5], ids=["contiguous", "paged8", "paged5"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_write(device: str, dtype: str, page: int | None, rope: str | None) -> None:
    kc, vc, k, v, start, table = _write_case(("write", page, rope), dtype, page)
    r = 30  # partial rotary: dims 30..33 pass through
    cos, sin = cpu.rope_tables(64, r, base=100.0)
    dk, dv = up(kc, device), up(vc, device)
    # k as a token-major [B, Sq, Hkv, D] buffer viewed as [B, Hkv, Sq, D] (a projection output)
    dks = up(np.ascontiguousarray(k.transpose(0, 2, 1, 3)), device).transpose(0, 2, 1, 3)
    tabs = (up(cos, device), up(sin, device)) if rope else (None, None)
    bt = None if table is None else up(table, device)
    ad.kv_cache_write(dk, dv, dks, up(v, device), up(start, device), bt, *tabs,
                      rope_style=rope or "neox")  # fmt: skip
    knew = as64(k)
    if rope:
        pos = start[:, None] + np.arange(k.shape[2])
        knew[..., :r] = ref_rope_k(k[..., :r], pos, cos, sin, rope)
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))
    if rope:
        assert_close(dk, ref_write(kc, knew, start, table), dtype)
    else:
        np.testing.assert_array_equal(as64(dk.to_numpy()), ref_write(kc, k, start, table))


@pytest.mark.parametrize("rope", ["neox", "gptj"])
@pytest.mark.parametrize("page", [None, 8], ids=["contiguous", "paged8"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_write_rotates_q(device: str, dtype: str, page: int | None, rope: str) -> None:
    """q [B, 2 Hkv, Sq, D], a head-major view of a token-major projection buffer, rotated in
    place at the tokens' positions in the same launch: the float64 rotation within the dtype's
    bound, the bits of the rope kernel on the same q, dims past rotary_dim untouched; the
    caches are written as without q."""
    kc, vc, k, v, start, table = _write_case(("write-q", page, rope), dtype, page)
    b, hkv, sq, d = k.shape
    rng = np.random.default_rng(seed("q", dtype, page, rope))
    q = rand(rng, (b, sq, 2 * hkv, d), dtype)  # token-major, as the projection writes it
    r = 30
    cos, sin = cpu.rope_tables(64, r, base=100.0)
    tabs = (up(cos, device), up(sin, device))
    dq = up(q, device)
    dk, dv = up(kc, device), up(vc, device)
    bt = None if table is None else up(table, device)
    ad.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), bt, *tabs,
                      dq.transpose(0, 2, 1, 3), rope_style=rope)  # fmt: skip
    pos = start[:, None] + np.arange(sq)
    qh = q.transpose(0, 2, 1, 3)
    want = as64(qh)
    want[..., :r] = ref_rope_k(qh[..., :r], pos, cos, sin, rope)
    got = dq.to_numpy().transpose(0, 2, 1, 3)
    assert_close(got, want, dtype)
    np.testing.assert_array_equal(got[..., r:], qh[..., r:])
    from pygpukit.backends.triton_kernels.rope import rope as rope_kernel

    twin = rope_kernel(up(q, device), *tabs, up(pos, device), style=rope, rotary_dim=r)
    np.testing.assert_array_equal(dq.to_numpy(), twin.to_numpy())
    knew = as64(k)
    knew[..., :r] = ref_rope_k(k[..., :r], pos, cos, sin, rope)
    assert_close(dk, ref_write(kc, knew, start, table), dtype)
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))


@pytest.mark.parametrize(("hq", "hkv"), [(8, 1), (32, 8), (40, 8)])
def test_write_rotates_q_head_counts(device: str, hq: int, hkv: int) -> None:
    """One kv head (MQA), 32 q heads over 8, and a head count past one block of q heads
    (40 > 32 at D 128): every q head rotated, k written."""
    rng = np.random.default_rng(seed("q-heads", hq, hkv))
    b, sq, d, s_max = 2, 3, 128, 16
    q = rand(rng, (b, hq, sq, d), "float32")
    k, v = rand(rng, (b, hkv, sq, d), "float32"), rand(rng, (b, hkv, sq, d), "float32")
    cos, sin = cpu.rope_tables(32, d, base=100.0)
    start = np.array([2, 9], np.int32)
    dk, dq = up(np.zeros((b, hkv, s_max, d), np.float32), device), up(q, device)
    ad.kv_cache_write(dk, up(np.zeros((b, hkv, s_max, d), np.float32), device), up(k, device),
                      up(v, device), up(start, device), None, up(cos, device), up(sin, device),
                      dq)  # fmt: skip
    pos = start[:, None] + np.arange(sq)
    assert_close(dq, ref_rope_k(q, pos, cos, sin, "neox"), "float32")
    knew = ref_rope_k(k, pos, cos, sin, "neox")
    assert_close(dk, ref_write(np.zeros((b, hkv, s_max, d)), knew, start), "float32")


@pytest.mark.parametrize("rope", ["neox", "gptj"])
@pytest.mark.parametrize("page", [None, 8], ids=["contiguous", "paged8"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_write_normalises_heads(device: str, dtype: str, page: int | None, rope: str) -> None:
    """q_norm / k_norm (Qwen3's per-head RMSNorm before RoPE) in the same launch: k and q
    normalised over the head (float64 statistics in the reference, rounded to the dtype as
    gp.rmsnorm stores them), then rotated over the whole head; v and the untouched cache slots
    as without norms."""
    rng = np.random.default_rng(seed("write-norm", dtype, page, rope))
    b, hkv, sq, s_max, d = 3, 2, 2, 24, 32
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype) * 3, rand(rng, (b, hkv, sq, d), dtype)
    table = None
    if page is not None:
        kc, vc, table = to_paged(rng, page, kc, vc)
    start = np.array([0, 7, s_max - sq], np.int32)
    q = rand(rng, (b, sq, 3 * hkv, d), dtype)  # token-major, as the projection writes it
    qw, kw = (
        (1 + rand(rng, d, dtype) / 4).astype(q.dtype),
        (1 + rand(rng, d, dtype) / 4).astype(q.dtype),
    )
    cos, sin = cpu.rope_tables(64, d, base=100.0)
    tabs = (up(cos, device), up(sin, device))
    dq, dk, dv = up(q, device), up(kc, device), up(vc, device)
    bt = None if table is None else up(table, device)
    eps = 1e-5
    ad.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), bt, *tabs,
                      dq.transpose(0, 2, 1, 3), rope_style=rope, q_norm=up(qw, device),
                      k_norm=up(kw, device), norm_eps=eps)  # fmt: skip

    def normed(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        x64 = as64(x)
        y = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps) * as64(w)
        return as64(y.astype(x.dtype))  # gp.rmsnorm rounds its result to the dtype

    pos = start[:, None] + np.arange(sq)
    qh = q.transpose(0, 2, 1, 3)
    assert_close(
        dq.to_numpy().transpose(0, 2, 1, 3), ref_rope_k(normed(qh, qw), pos, cos, sin, rope), dtype
    )
    knew = ref_rope_k(normed(k, kw), pos, cos, sin, rope)
    assert_close(dk, ref_write(kc, knew, start, table), dtype)
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))


def test_write_never_out_of_bounds(device: str) -> None:
    """Positions outside the cache and block ids outside it are skipped (no host check is
    possible); positions past the rope tables give NaN in the rotated dims, as gp.rope does."""
    kc, vc, k, v, _, table = _write_case(("oob",), "float32", 8)
    assert table is not None
    start = np.array([-2, 38, 5], np.int32)  # seq 0: tokens 0, 1 before the cache; seq 1 past
    table = table.copy()
    table[2, 0] = kc.shape[0]  # seq 2: its first page (positions 5..7) names a missing block
    dk, dv = up(kc, device), up(vc, device)
    ad.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), up(table, device))
    ok_k, ok_v = kc.copy(), vc.copy()
    page = 8
    for b, j in [(0, 2), (0, 3), (1, 0), (1, 1), (2, 3)]:  # the valid (sequence, token) pairs
        p = start[b] + j
        ok_k[table[b, p // page], :, p % page] = k[b, :, j]
        ok_v[table[b, p // page], :, p % page] = v[b, :, j]
    np.testing.assert_array_equal(dk.to_numpy(), ok_k)
    np.testing.assert_array_equal(dv.to_numpy(), ok_v)
    cos, sin = cpu.rope_tables(16, 34)
    kc2, vc2, k2, v2, _, _ = _write_case(("oob-rope",), "float32", None)
    dk = up(kc2, device)
    start = np.array([0, 14, 20], np.int32)  # positions 16.. are past the 16-row tables
    dq = up(np.ones((3, 6, 4, 34), np.float32), device)  # q: 6 heads, every token rotated
    ad.kv_cache_write(dk, up(vc2, device), up(k2, device), up(v2, device), up(start, device),
                      None, up(cos, device), up(sin, device), dq)  # fmt: skip
    got = dk.to_numpy()
    assert np.isfinite(got[0, :, 0:4]).all() and np.isfinite(got[1, :, 14:16]).all()
    assert np.isnan(got[1, :, 16:18, :34]).all() and np.isnan(got[2, :, 20:24, :34]).all()
    gq = dq.to_numpy()  # token j of sequence b at position start[b] + j, as k
    assert np.isfinite(gq[0]).all() and np.isfinite(gq[1, :, :2]).all()
    assert np.isnan(gq[1, :, 2:]).all() and np.isnan(gq[2]).all()
    start = np.array([-1, 0, 0], np.int32)  # a position before the cache: q's token 0 is NaN
    dq = up(np.ones((3, 6, 4, 34), np.float32), device)
    ad.kv_cache_write(dk, up(vc2, device), up(k2, device), up(v2, device), up(start, device),
                      None, up(cos, device), up(sin, device), dq)  # fmt: skip
    gq = dq.to_numpy()
    assert np.isnan(gq[0, :, 0]).all() and np.isfinite(gq[0, :, 1:]).all()


@pytest.mark.parametrize("early", [False, True], ids=["angles-after", "angles-early"])
@pytest.mark.parametrize(
    ("rope", "norms"), [("neox", False), ("gptj", False), ("neox", True), ("gptj", True)]
)
@pytest.mark.parametrize("dtype", FLOATS)
def test_write_in_constant_weights_same_bits(
    device: str, dtype: str, rope: str, norms: bool, early: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside constant_weights() the write loads the positions before it waits
    (PREFETCH_POSITIONS), and with ANGLES_EARLY the cos/sin of the position and the head-norm
    weights too: the caches and q get the bits of the plain call, with positions before the
    cache (skipped, q NaN), inside it, past the rope tables (NaN) and past the cache
    (skipped)."""
    from pygpukit.backends._support.weights import constant_weights
    from pygpukit.backends.triton_kernels import kv_write

    monkeypatch.setattr(kv_write, "PREFETCH_POSITIONS", True)
    monkeypatch.setattr(kv_write, "ANGLES_EARLY", early)
    seen: list[tuple[bool, bool]] = []
    launch = kv_write.launch

    def spy(kernel: Any, grid: Any, *args: Any, **c: Any) -> Any:
        seen.append((bool(c["PREFETCH"]), bool(c["EARLY_ANGLES"])))
        return launch(kernel, grid, *args, **c)

    monkeypatch.setattr(kv_write, "launch", spy)

    kc, vc, k, v, _, _ = _write_case(("write-early", rope, norms), dtype, None)
    b, hkv, sq, d = k.shape
    rng = np.random.default_rng(seed("write-early-q", rope, norms))
    q = rand(rng, (b, 2 * hkv, sq, d), dtype)
    cos, sin = cpu.rope_tables(38, d, base=100.0)  # positions 38.. are past the tables
    start = np.array([-2, 35, 38], np.int32)  # -2, -1 before the cache; 40.. past it (40 slots)
    kw: dict[str, Any] = {"rope_style": rope}
    if norms:
        kw.update(q_norm=up(1 + rand(rng, d, dtype) / 4, device),
                  k_norm=up(1 + rand(rng, d, dtype) / 4, device), norm_eps=1e-5)  # fmt: skip

    def write() -> tuple:
        dk, dv, dq = up(kc, device), up(vc, device), up(q, device)
        ad.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), None,
                          up(cos, device), up(sin, device), dq, **kw)  # fmt: skip
        return dk.to_numpy(), dv.to_numpy(), dq.to_numpy()

    plain = write()
    with constant_weights():
        got = write()
    assert seen == [(False, False), (True, early)]
    for g, want in zip(got, plain, strict=True):
        bits = f"u{want.dtype.itemsize}"
        np.testing.assert_array_equal(g.view(bits), want.view(bits))
    gq = plain[2]
    assert np.isnan(gq[0, :, :2]).all() and np.isfinite(gq[0, :, 2:]).all()
    assert np.isnan(gq[1, :, 3]).all() and np.isfinite(gq[1, :, :3]).all()
    assert np.isnan(gq[2]).all()


def test_write_copied_norm_weights_load_after_the_wait(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head-norm weight that is a strided view is copied first, and that copy is then the
    kernel just before the write: inside constant_weights() the write loads nothing of it
    before the wait (EARLY_ANGLES off), and its bits are the plain call's."""
    from pygpukit.backends._support.weights import constant_weights
    from pygpukit.backends.triton_kernels import kv_write

    monkeypatch.setattr(kv_write, "PREFETCH_POSITIONS", True)
    monkeypatch.setattr(kv_write, "ANGLES_EARLY", True)
    seen: list[bool] = []
    launch = kv_write.launch

    def spy(kernel: Any, grid: Any, *args: Any, **c: Any) -> Any:
        seen.append(bool(c["EARLY_ANGLES"]))
        return launch(kernel, grid, *args, **c)

    monkeypatch.setattr(kv_write, "launch", spy)
    kc, vc, k, v, _, _ = _write_case(("write-copied-norm",), "float32", None)
    b, hkv, sq, d = k.shape
    rng = np.random.default_rng(seed("write-copied-norm-q"))
    q = rand(rng, (b, 2 * hkv, sq, d), "float32")
    cos, sin = cpu.rope_tables(64, d, base=100.0)
    start = np.array([0, 5, 9], np.int32)[:b]
    qn2 = 1 + rand(rng, 2 * d, "float32") / 4
    kn = up(1 + rand(rng, d, "float32") / 4, device)

    def write(q_norm: Any) -> tuple:
        dk, dv, dq = up(kc, device), up(vc, device), up(q, device)
        ad.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), None,
                          up(cos, device), up(sin, device), dq, rope_style="neox",
                          q_norm=q_norm, k_norm=kn, norm_eps=1e-5)  # fmt: skip
        return dk.to_numpy(), dv.to_numpy(), dq.to_numpy()

    plain = write(up(qn2[::2].copy(), device))
    with constant_weights():
        got = write(up(qn2, device)[::2])
    assert seen == [False, False]
    for g, want in zip(got, plain, strict=True):
        np.testing.assert_array_equal(g.view("u4"), want.view("u4"))


# ----- GPU: half precision at the lengths -------------------------------------------


@GPU
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("page", [None, 16, 64], ids=["contiguous", "paged16", "paged64"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_lengths(device: str, dtype: str, page: int | None, causal: bool, sq: int) -> None:
    lens = np.array([1, 17, 1000, 4097], np.int32)
    q, kc, vc, table = _caches(("gpu", page, causal, sq), dtype, 4, 32, 8, sq, 4097, 128, page)
    out = poisoned(q.shape, dtype, device)
    bt = None if table is None else up(table, device)
    gp.sdpa_decode(up(q, device), up(kc, device), up(vc, device), up(lens, device),
                   block_table=bt, causal=causal, out=out)  # fmt: skip
    assert_close(out, ref_decode(q, kc, vc, lens, table, causal), dtype)


@GPU
@pytest.mark.parametrize("group", [1, 8])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_groups_paged_vs_contiguous(device: str, dtype: str, group: int) -> None:
    rng = np.random.default_rng(seed("gpu-groups", dtype, group))
    hkv, lens = 4, np.array([4097, 1000, 17, 1], np.int32)
    q = rand(rng, (4, hkv * group, 2, 128), dtype)
    kc, vc = rand(rng, (4, hkv, 4104, 128), dtype), rand(rng, (4, hkv, 4104, 128), dtype)
    kp, vp, table = to_paged(rng, 8, kc, vc)
    a = _run(device, q, kc, vc, lens, None)
    b = _run(device, q, kp, vp, lens, table)
    ref = ref_decode(q, kc, vc, lens, None, True)
    assert_close(a, ref, dtype, name="contiguous")
    assert_close(b, ref, dtype, name="paged")
    assert_close(b, as64(a.to_numpy()), dtype, name="paged vs contiguous")


@GPU
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "combine-kernel"])
def test_gpu_new_lengths_same_buffers(device: str, fused: bool, page: int | None) -> None:
    """Batch 1 with a long cache (many splits; the contiguous one in the few-programs class):
    rewriting the device lengths in place changes the result of the identical call, including
    lengths that leave splits idle."""
    q, kc, vc, table = _caches(("gpu-len", fused, page), "bfloat16", 1, 32, 8, 1, 32768, 128,
                               page)  # fmt: skip
    dq, dk, dv = (up(t, device) for t in (q, kc, vc))
    bt = None if table is None else up(table, device)
    pl = ad.decode_plan(1, 32, 8, 1, 128, 32768, True, ad.sm_count(dq), page=page or 0)
    assert pl.few == (page is None and ad.sm_count(dq) >= 8 * ad.FEW_SPLITS_NEEDED)
    lens = up(np.array([32768], np.int32), device)
    out = poisoned(q.shape, "bfloat16", device)
    for n in (32768, 5, 20000, 1):
        lens[:] = np.array([n], np.int32)
        ad._sdpa_decode(dq, dk, dv, lens, bt, True, None, out, fused=fused)
        ref = ref_decode(q, kc, vc, np.array([n]), table, True)
        assert_close(out, ref, "bfloat16", name=f"length {n}")


@GPU
@pytest.mark.parametrize("rope", [None, "neox", "gptj"])
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
def test_gpu_write_routed(device: str, page: int | None, rope: str | None) -> None:
    kc, vc, k, v, start, table = _write_case(("gpu-write", page, rope), "bfloat16", page)
    cos, sin = gp.rope_tables(64, 34, device=device)
    dk, dv = up(kc, device), up(vc, device)
    bt = None if table is None else up(table, device)
    tabs = {"cos": cos, "sin": sin, "rope_style": rope} if rope else {}
    gp.kv_cache_write(dk, dv, up(k, device), up(v, device), up(start, device), block_table=bt,
                      **tabs)  # fmt: skip
    knew = as64(k)
    if rope:
        pos = start[:, None] + np.arange(k.shape[2])
        knew = ref_rope_k(k, pos, cos.to_numpy(), sin.to_numpy(), rope)
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))
    assert_close(dk, ref_write(kc, knew, start, table), "bfloat16")


@GPU
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
def test_gpu_cuda_graph_replays_new_lengths(device: str, page: int | None) -> None:
    """One decode step (kv_cache_write with RoPE on k, then sdpa_decode over lengths held on the
    device) captured once with gp.CUDAGraph and replayed with new tokens, positions and lengths
    written into the same device arrays: every replay equals the eager step on a twin cache, bit
    for bit, and the float64 reference. The graph gets a split workspace of its own, zeroed at
    capture time; its combine counters reset themselves at the end of every launch."""
    s_max, rng = 4096, np.random.default_rng(seed("graph", page))
    q, kc, vc, table = _caches(("graph", page), "bfloat16", 1, 32, 8, 1, s_max, 128, page)
    knew, vnew = rand(rng, (1, 8, 1, 128), "bfloat16"), rand(rng, (1, 8, 1, 128), "bfloat16")
    cos, sin = gp.rope_tables(s_max, 128, device=device)
    dq, dkn, dvn = up(q, device), up(knew, device), up(vnew, device)
    bt = None if table is None else up(table, device)
    lens, pos = up(np.array([1], np.int32), device), up(np.array([0], np.int32), device)
    graph_kv = (up(kc, device), up(vc, device))
    eager_kv = (up(kc, device), up(vc, device))
    outs = [poisoned(q.shape, "bfloat16", device) for _ in range(2)]

    def step(kv: tuple, out: gp.GPUArray) -> None:
        ad.kv_cache_write(kv[0], kv[1], dkn, dvn, pos, bt, cos, sin)
        ad._sdpa_decode(dq, kv[0], kv[1], lens, bt, True, None, out)

    ours = gp.Stream(device=gp.device(device).index)
    g = gp.CUDAGraph(device)
    with gp.stream(ours):
        step(graph_kv, outs[0])  # warm-up: compiles the kernels
        step(eager_kv, outs[1])
        with g.capture(ours):
            step(graph_kv, outs[0])
        assert g.kept_bytes > 0  # the graph's own split workspace
        ref_kv = [as64(kc), as64(vc)]

        def ref_step(n: int) -> np.ndarray:  # the float64 step at length n on the host caches
            at = np.array([n - 1], np.int32)
            krot = ref_rope_k(knew, at[:, None], cos.to_numpy(), sin.to_numpy(), "neox")
            ref_kv[0] = ref_write(ref_kv[0], krot, at, table)
            ref_kv[1] = ref_write(ref_kv[1], vnew, at, table)
            return ref_decode(q, ref_kv[0], ref_kv[1], np.array([n]), table, True)

        ref_step(1)  # the warm-up wrote position 0
        for n in (17, 1000, 4096, 300, 1):
            q = rand(rng, q.shape, "bfloat16")
            knew, vnew = rand(rng, knew.shape, "bfloat16"), rand(rng, vnew.shape, "bfloat16")
            for dst, src in ((dq, q), (dkn, knew), (dvn, vnew)):
                dst[:] = src
            lens[:] = np.array([n], np.int32)
            pos[:] = np.array([n - 1], np.int32)
            g.replay()
            step(eager_kv, outs[1])
            got = [o.to_numpy() for o in outs]  # synchronizes the stream
            np.testing.assert_array_equal(got[0], got[1], err_msg=f"length {n}")
            for a, b in zip(graph_kv, eager_kv, strict=True):
                np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
            assert_close(outs[0], ref_step(n), "bfloat16", name=f"graph replay, length {n}")


@pytest.mark.parametrize("group", [3, 4])
@pytest.mark.parametrize("dtype", FLOATS)
def test_fixed_plan_rows_do_not_depend_on_sq_or_batch(device: str, dtype: str, group: int) -> None:
    """The deterministic mode's plan (fixed 256-key splits, 16-row tiles): query row i of a
    k-token call equals the 1-token call at its position bit for bit (a speculative check equals
    plain decoding), and a sequence's rows do not depend on the other sequences."""
    lens = np.array([600, 300, 513], np.int32)
    q, kc, vc, _ = _caches(("fixed", group), dtype, 3, 2 * group, 2, 16, 700, 64, None)
    with gp.deterministic():
        assert ad.decode_plan(3, 2 * group, 2, 9, 64, 700, False, 132, fixed=True).splits == 3
        for sq in (1, 5, 9, 16):
            qs = np.ascontiguousarray(q[:, :, :sq])
            many = _run(device, qs, kc, vc, lens, None).to_numpy()
            assert_close(many, ref_decode(qs, kc, vc, lens, None, True), dtype)
            for i in range(sq):
                one = _run(device, q[:, :, i : i + 1], kc, vc, lens - sq + 1 + i, None)
                assert one.to_numpy().tobytes() == many[:, :, i : i + 1].tobytes(), (sq, i)
        alone = _run(device, q[1:2, :, :5], kc[1:2], vc[1:2], lens[1:2], None).to_numpy()
        batch = _run(device, q[:, :, :5], kc, vc, lens, None).to_numpy()
        assert alone.tobytes() == batch[1:2].tobytes()
