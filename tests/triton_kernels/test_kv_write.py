"""Triton kv_cache_write (new tokens into a contiguous or paged KV cache, RoPE on k and the
queries fused in, Qwen3's head norms) against float64 references; the interpreter runs the fp32
cases at small sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _kvcache import ref_rope_k, ref_write, to_paged
from _tkutil import FLOATS, FLOATS64, GPU, up

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels import attention_decode as ad


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


# ----- GPU ----------------------------------------------------------------------------------


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
