"""The Triton sdpa_decode's launch plan: the knob classes (few programs or many), the split
count that fills the GPU, and the keys a split takes by the sequence's length (floor, one-split
reach, the capacity's chunk) against launches with the split forced and the float64 reference;
the interpreter runs the fp32 cases at small sizes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _kvcache import ref_decode
from _tkutil import poisoned, up
from test_attention_decode import _caches, _run

from pygpukit.backends._support import scratch
from pygpukit.backends.triton_kernels import attention_decode as ad


def test_plan_fills_the_gpu() -> None:
    """Split heuristics on an H200-sized GPU (132 SMs): batch 1 with a long context gets one
    program per SM or more; splits cover the capacity; large batches do not split."""
    for cap in (4096, 16384, 32768):
        for page in (0, 16, 64):
            p = ad.decode_plan(1, 32, 8, 1, 128, cap, True, 132, page=page)
            assert p.splits * 8 >= 128 and p.splits * p.chunk >= cap > (p.splits - 1) * p.chunk
            least = ad.FEW_MIN_SPLIT_KEYS if p.few else ad.MIN_SPLIT_KEYS
            assert p.chunk % p.block_n == 0 and p.chunk >= least
    assert ad.decode_plan(64, 32, 8, 1, 128, 4096, True, 132).splits == 1
    assert ad.decode_plan(1, 32, 8, 1, 128, 100, True, 132).splits == 1


def test_plan_classes() -> None:
    """On 132 SMs, batch 1-4 over a contiguous cache take the FEW_* knobs in one wave of
    FEW_PROGRAMS_PER_SM programs per SM; batch 8/16 and pages smaller than FEW_BLOCK_N keep the
    other knobs; FEW_PAGED (off by default) admits pages that hold whole FEW_BLOCK_N blocks;
    forcing the class works."""
    few = (ad.FEW_BLOCK_N, ad.FEW_NUM_WARPS, ad.FEW_NUM_STAGES, ad.FEW_FUSED_COMBINE)
    many = (ad.BLOCK_N, ad.NUM_WARPS, ad.NUM_STAGES, ad.FUSED_COMBINE)
    for batch in (1, 2, 4):
        p = ad.decode_plan(batch, 32, 8, 1, 128, 32768, True, 132)
        assert p.few and (p.block_n, p.num_warps, p.num_stages, p.fused) == few
        assert batch * 8 * p.splits <= 132 * ad.FEW_PROGRAMS_PER_SM < batch * 8 * (p.splits + 1)
    for batch, page in [(8, 0), (16, 0), (1, 16), (16, 64)]:
        p = ad.decode_plan(batch, 32, 8, 1, 128, 4096, True, 132, page=page)
        assert not p.few and (p.block_n, p.num_warps, p.num_stages, p.fused) == many
    assert ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, page=64).few == ad.FEW_PAGED
    assert ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, few=False).block_n == ad.BLOCK_N
    assert ad.decode_plan(16, 32, 8, 1, 128, 4096, True, 132, few=True).few
    # fp32 tiles are twice the bytes: two stages in either class
    assert ad.decode_plan(1, 32, 8, 1, 128, 4096, False, 132).num_stages == 2


def test_plan_row_sums_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """FEW_ROW_SUMS_LAST reaches the few-programs class with up to 16 packed rows (Sq 1-4 at
    4 query heads a kv head), never the other class, wider row tiles or the deterministic plan."""
    for on in (True, False):
        monkeypatch.setattr(ad, "FEW_ROW_SUMS_LAST", on)
        for sq in (1, 4):
            assert ad.decode_plan(1, 32, 8, sq, 128, 4096, True, 132).row_sums_last == on
        assert not ad.decode_plan(1, 32, 8, 16, 128, 4096, True, 132).row_sums_last  # 64 rows
        assert not ad.decode_plan(16, 32, 8, 1, 128, 4096, True, 132).row_sums_last
        assert not ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, fixed=True).row_sums_last


def test_plan_class_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ad, "FEW_PAGED", True)
    assert ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, page=2 * ad.FEW_BLOCK_N).few
    assert not ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, page=16).few
    monkeypatch.setattr(ad, "FEW_PAGED", False)
    assert not ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, page=2 * ad.FEW_BLOCK_N).few
    monkeypatch.setattr(ad, "FEW_SPLITS_NEEDED", 0)  # the class is off
    assert not ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132).few


# Odd lengths over a 1000-slot cache: one key, part of one block, and 15 blocks plus 40 keys.
FEW_LENS = np.array([1, 17, 1000], np.int32)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "combine-kernel"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_few_class(device: str, group: int, causal: bool, fused: bool,
                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The few-programs class with its own knobs (forced: the interpreter's 2 SMs never pick
    it): FEW_BLOCK_N-key blocks, 4 splits of 256 keys, lengths read from the device and
    rewritten in place between two identical calls."""
    monkeypatch.setattr(ad, "FEW_FUSED_COMBINE", fused)
    q, kc, vc, _ = _caches(("few", group, causal), "float32", 3, 2 * group, 2, 1, 1000, 32,
                           None)  # fmt: skip
    dq, dk, dv = up(q, device), up(kc, device), up(vc, device)
    lens = up(FEW_LENS, device)
    plan = ad.decode_plan(3, 2 * group, 2, 1, 32, 1000, False, 2, num_splits=5, few=True)
    assert plan.few and plan.block_n == ad.FEW_BLOCK_N and plan.fused == fused
    assert plan.splits == 4 and plan.chunk == 4 * ad.FEW_BLOCK_N
    out = poisoned(q.shape, "float32", device)
    ad._sdpa_decode(dq, dk, dv, lens, None, causal, None, out, num_splits=5, few=True)
    assert_close(out, ref_decode(q, kc, vc, FEW_LENS, None, causal), "float32")
    new = np.array([1000, 999, 64], np.int32)
    lens[:] = new
    ad._sdpa_decode(dq, dk, dv, lens, None, causal, None, out, num_splits=5, few=True)
    assert_close(out, ref_decode(q, kc, vc, new, None, causal), "float32", name="new lengths")


@pytest.mark.parametrize("page", [None, 32], ids=["contiguous", "paged32"])
def test_few_class_from_the_plan(device: str, page: int | None,
                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The class chosen by the plan itself (a 64-SM device, FEW_PAGED on, 16-key blocks, chunks
    of 32 keys): 5 splits over 160 slots, Sq 3 (a causal tile)."""
    monkeypatch.setattr(ad, "sm_count", lambda x: 64)
    monkeypatch.setattr(ad, "FEW_PAGED", True)
    monkeypatch.setattr(ad, "FEW_BLOCK_N", 16)
    monkeypatch.setattr(ad, "FEW_MIN_SPLIT_KEYS", 32)
    q, kc, vc, table = _caches(("few-plan", page), "float32", 4, 8, 2, 3, 160, 32, page)
    plan = ad.decode_plan(4, 8, 2, 3, 32, 160, False, 64, page=page or 0)
    assert plan.few and plan.splits == 5 and plan.block_n == 16
    lens = np.array([1, 17, 100, 160], np.int32)
    out = poisoned(q.shape, "float32", device)
    o = _run(device, q, kc, vc, lens, table, out=out)
    assert_close(o, ref_decode(q, kc, vc, lens, table, True), "float32")


def test_plan_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fewest keys a split takes (the class's MIN_SPLIT_KEYS in whole blocks, never above
    the capacity's chunk) and the one-split reach (FEW_ONE_SPLIT_KEYS in the few-programs
    class); a forced split count, the deterministic plan and LENGTH_CHUNKS off fix the chunk at
    every length."""
    p = ad.decode_plan(1, 32, 8, 1, 128, 32768, True, 132)
    assert p.few and p.chunk == 2048 and p.floor == ad.FEW_MIN_SPLIT_KEYS
    assert p.solo == ad.FEW_ONE_SPLIT_KEYS
    p = ad.decode_plan(8, 32, 8, 1, 128, 32768, True, 132)
    assert not p.few and p.floor == ad.MIN_SPLIT_KEYS < p.chunk and p.solo == 0
    p = ad.decode_plan(1, 32, 8, 1, 128, 272, True, 132)
    assert p.floor == ad.FEW_MIN_SPLIT_KEYS <= p.chunk < p.solo == ad.FEW_ONE_SPLIT_KEYS
    for p in (
        ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, num_splits=4),
        ad.decode_plan(1, 32, 8, 1, 128, 4096, True, 132, fixed=True),
    ):
        assert p.floor == p.chunk and p.solo == 0
    monkeypatch.setattr(scratch, "LENGTH_CHUNKS", False)
    p = ad.decode_plan(1, 32, 8, 1, 128, 32768, True, 132)
    assert p.floor == p.chunk == 2048 and p.solo == 0


def test_split_chunk_rule() -> None:
    """The host mirror of the kernels' rule: up to solo keys one split, past it a length's
    blocks spread over the splits within [floor, chunk]."""
    sp = scratch.KeySplits(16, 2048, 128)
    got = [scratch.split_chunk(n, sp, 64) for n in (0, 1, 200, 1000, 2000, 2049, 20000, 32768)]
    assert got == [128, 128, 128, 128, 128, 192, 1280, 2048]
    sp = scratch.KeySplits(16, 2048, 128, 256)
    got = [scratch.split_chunk(n, sp, 64) for n in (0, 1, 129, 200, 256, 257, 1000, 2049)]
    assert got == [128, 128, 192, 256, 256, 128, 128, 192]
    sp = scratch.KeySplits(2, 192, 128, 256)  # a short cache: one split past its chunk
    got = [scratch.split_chunk(n, sp, 64) for n in (1, 150, 250, 257, 384)]
    assert got == [128, 192, 256, 192, 192]


# A 1024-slot cache and 4 splits of 256 keys at full length (the few-programs class on 8 SMs,
# FEW_MIN_SPLIT_KEYS 64: floor 64; FEW_ONE_SPLIT_KEYS 256): lengths of one block or less and
# of 4 blocks (one split, where the floor alone gives 4 of a block), 5 blocks (3 splits of
# two blocks, where the capacity's chunk gives 2 of four), 9 blocks (3 splits of three) and
# the whole cache.
CHUNK_LENS = (1, 64, 200, 300, 576, 1024)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "combine-kernel"])
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("length", CHUNK_LENS)
def test_length_chunks(device: str, length: int, sq: int, fused: bool,
                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A sequence far shorter than its cache spreads over the splits: the call equals, bit for
    bit, a launch over a cache cut to the chunk the rule gives (split_chunk) times the splits,
    with that split forced, and the float64 reference; with the last split combining or the
    combine kernel (which must count the same active splits)."""
    monkeypatch.setattr(ad, "sm_count", lambda x: 8)
    monkeypatch.setattr(ad, "FEW_MIN_SPLIT_KEYS", 64)
    monkeypatch.setattr(ad, "FEW_ONE_SPLIT_KEYS", 256)
    q, kc, vc, _ = _caches(("chunks", length, sq), "float32", 1, 4, 2, sq, 1024, 32, None)
    lens = np.array([length], np.int32)
    pl = ad.decode_plan(1, 4, 2, sq, 32, 1024, False, 8)
    assert (pl.few, pl.splits, pl.chunk, pl.floor, pl.solo) == (True, 4, 256, 64, 256)
    keys = scratch.split_chunk(length, scratch.KeySplits(4, 256, 64, 256), 64)
    assert keys == {1: 64, 64: 64, 200: 256, 300: 128, 576: 192, 1024: 256}[length]
    out = poisoned(q.shape, "float32", device)
    _run(device, q, kc, vc, lens, None, out=out, fused=fused)
    assert_close(out, ref_decode(q, kc, vc, lens, None, True), "float32")
    cut = keys * pl.splits
    short = _run(device, q, kc[:, :, :cut].copy(), vc[:, :, :cut].copy(), lens, None,
                 num_splits=pl.splits, fused=fused)  # fmt: skip
    assert ad.decode_plan(1, 4, 2, sq, 32, cut, False, 8, num_splits=pl.splits).chunk == keys
    np.testing.assert_array_equal(out.to_numpy(), short.to_numpy())


@pytest.mark.parametrize("length", [200, 300, 576, 1024])
def test_length_chunks_paged(device: str, length: int,
                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The length rule on a paged cache of 64-slot pages in the few-programs class (FEW_PAGED
    on): the float64 reference at lengths of one split, 3 splits of 128 and 3 of 192."""
    monkeypatch.setattr(ad, "sm_count", lambda x: 8)
    monkeypatch.setattr(ad, "FEW_PAGED", True)
    monkeypatch.setattr(ad, "FEW_MIN_SPLIT_KEYS", 64)
    monkeypatch.setattr(ad, "FEW_ONE_SPLIT_KEYS", 256)
    q, kc, vc, table = _caches(("chunks-paged", length), "float32", 1, 4, 2, 1, 1024, 32, 64)
    pl = ad.decode_plan(1, 4, 2, 1, 32, 1024, False, 8, page=64)
    assert (pl.few, pl.splits, pl.chunk, pl.floor, pl.solo) == (True, 4, 256, 64, 256)
    lens = np.array([length], np.int32)
    out = _run(device, q, kc, vc, lens, table)
    assert_close(out, ref_decode(q, kc, vc, lens, table, True), "float32")


@pytest.mark.parametrize("length", [100, 129, 200, 256, 257, 320])
def test_one_split_past_the_chunk(device: str, length: int,
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A 320-slot cache in 3 splits of 128 keys with a one-split reach of 256 keys: up to 256
    keys the call equals one forced split over the cache bit for bit; past it the capacity's
    three (the length's blocks spread over the splits); both against the float64 reference."""
    monkeypatch.setattr(ad, "sm_count", lambda x: 8)
    monkeypatch.setattr(ad, "FEW_MIN_SPLIT_KEYS", 64)
    monkeypatch.setattr(ad, "FEW_ONE_SPLIT_KEYS", 256)
    q, kc, vc, _ = _caches(("solo", length), "float32", 1, 4, 2, 1, 320, 32, None)
    lens = np.array([length], np.int32)
    pl = ad.decode_plan(1, 4, 2, 1, 32, 320, False, 8)
    assert (pl.few, pl.splits, pl.chunk, pl.floor, pl.solo) == (True, 3, 128, 64, 256)
    keys = scratch.split_chunk(length, scratch.KeySplits(3, 128, 64, 256), 64)
    assert -(-length // keys) == (1 if length <= 256 else 3)
    out = _run(device, q, kc, vc, lens, None)
    assert_close(out, ref_decode(q, kc, vc, lens, None, True), "float32")
    same = _run(device, q, kc, vc, lens, None, num_splits=1 if length <= 256 else 3)
    np.testing.assert_array_equal(out.to_numpy(), same.to_numpy())
