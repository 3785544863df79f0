"""Triton sdpa_decode (split-K over a contiguous or paged KV cache) against float64 references;
the interpreter runs the fp32 cases at small sizes. kv_cache_write: test_kv_write.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _kvcache import ref_decode, ref_rope_k, ref_write, to_paged
from _tkutil import FLOATS, GPU, poisoned, poisoned_strided, up

import pygpukit as gp
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


@pytest.mark.parametrize("sums_last", [True, False], ids=["sums-last", "sum-a-block"])
@pytest.mark.parametrize("one_loop", [True, False])
@pytest.mark.parametrize("sq", [1, 4])
def test_few_class_loops(
    device: str, sq: int, one_loop: bool, sums_last: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FEW_ONE_LOOP: the few-programs class with every key block in the masked loop (True) or
    the unmasked blocks then the masked tail, one split and several, against float64 at lengths
    of one key, a partial block, whole blocks and several splits; FEW_ROW_SUMS_LAST: the row
    sums kept by column and summed after the loop, or summed a block."""
    monkeypatch.setattr(ad, "FEW_ONE_LOOP", one_loop)
    monkeypatch.setattr(ad, "FEW_ROW_SUMS_LAST", sums_last)
    seen: list[bool] = []
    launch = ad.launch

    def spy(kernel: Any, grid: Any, *args: Any, **c: Any) -> Any:
        seen.append(bool(c.get("ALL_MASKED")))
        assert c.get("ROW_SUMS_LAST") == sums_last
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
