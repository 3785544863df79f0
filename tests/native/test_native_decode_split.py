"""The split-key tensor-core kernel of the native sdpa_decode twin
(native/src/attention_decode/split_decode.cu) through the public op with the route forced to
native, against the float64 reference (tests/_kvcache.py); its split plan and the C++ re-checks
of what the plan promises run without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import rand, seed
from _kvcache import decode_inputs, ref_decode, to_paged
from test_native_attention import OPS, _ext, _poison, _tm, _up

import pygpukit as gp
from pygpukit.backends._support import scratch
from pygpukit.backends.native import attention_decode as natd

gpu = pytest.mark.gpu


@pytest.fixture
def forced() -> Any:
    with gp.route(OPS):
        yield


def test_split_plan_covers_the_cache_in_whole_steps() -> None:
    for batch, heads, hkv, sq, d, cap, sms, page in [
        (1, 32, 8, 1, 128, 4096, 132, 0),
        (1, 32, 8, 1, 128, 32768, 132, 16),
        (16, 32, 8, 1, 64, 32768, 132, 16),
        (3, 8, 2, 4, 96, 1003, 132, 0),
        (2, 8, 1, 3, 256, 4097, 7, 1),
        (1, 64, 1, 16, 80, 5, 132, 24),
        (1, 4, 4, 1, 128, 0, 132, 0),
    ]:
        pl = natd.split_plan(batch, heads, hkv, sq, d, cap, sms, page)
        assert pl.stages == (natd.STAGES if d <= 128 else 2)
        assert pl.chunk % 16 == 0 and pl.chunk > 0
        assert pl.splits * pl.chunk >= cap and (pl.splits - 1) * pl.chunk < max(cap, 1)
        assert pl.tiles == -(-(heads // hkv * sq) // 16)
        if page:
            assert pl.entries == pl.chunk // page + 2 and pl.entries <= natd.MAX_ENTRIES
        assert pl.floor == min(pl.chunk, -(-natd.MIN_SPLIT_KEYS // 16) * 16)
        progs = batch * hkv * pl.tiles
        if progs * 2 <= sms and cap >= 2 * natd.MIN_SPLIT_KEYS:
            assert pl.splits > 1  # a small batch splits its keys to fill the GPU
    forced = natd.split_plan(1, 8, 2, 1, 128, 1000, 132, num_splits=5)
    assert forced.splits == 5 and forced.chunk == forced.floor == 208


def test_split_plan_page_of_one_slot_bounds_the_entries() -> None:
    pl = natd.split_plan(1, 8, 8, 1, 128, 100_000, 132, 1, num_splits=1)
    assert pl.entries <= natd.MAX_ENTRIES and pl.splits * pl.chunk >= 100_000


def test_split_kernel_cpp_rechecks_raise_value_error_before_any_cuda_call() -> None:
    """The split-key kernel re-checks what the adapter's eligibility test and plan promise."""
    ext = _ext()
    split = dict(splits=1, chunk=16, tiles=1, entries=0, stages=3, parts=0, lse=0, counters=0)
    base: list[Any] = [0, 0, "float16", 1, 2, 1, 1, 64, 16, 16, 16, 16, (0, 0, 64, 1),
                       (0, 0, 64, 1), (0, 0, 64, 1), (0, 0, 0, 1), 16, 1, 0, 0, 0, 0, 0, 16, 1.0,
                       True]  # fmt: skip

    def call(at: dict[int, Any] | None = None, **kw: Any) -> None:
        args = list(base)
        for i, val in (at or {}).items():
            args[i] = val
        ext.sdpa_decode(*args, **{**split, **kw})

    for at, kw, msg in [
        ({2: "float32"}, {}, "takes float16 or bfloat16"),
        ({7: 72}, {}, "head dim 64, 80, 96, 128 or 256, got 72"),
        ({}, {"tiles": 2}, "tiles must be ceil"),
        ({}, {"chunk": 8}, "chunk a multiple of 16"),
        ({}, {"floor": 8}, "floor must be a multiple of 16"),
        ({}, {"floor": 32}, "floor must be a multiple of 16 in \\[16, chunk\\]"),
        ({23: 32}, {}, "splits \\* chunk cover the cache"),
        ({13: (0, 0, 64, 2)}, {}, "unit-stride head dims"),
        ({9: 8}, {}, "16-byte aligned caches"),
        ({13: (0, 0, 60, 1)}, {}, "whole 16-byte rows"),
        ({}, {"splits": 2, "chunk": 16}, "needs the workspace"),
        ({18: 16, 21: 16, 22: 4}, {}, "entries must hold"),
        ({}, {"stages": 2}, "stages must be 3 or 4"),
    ]:
        with pytest.raises(ValueError, match=r"^sdpa_decode: .*" + msg):
            call(at, **kw)


@pytest.fixture
def split_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The split plans the native adapter launched with (proves the split kernel served)."""
    calls: list[Any] = []
    plan = natd.split_plan

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append(plan(*args, **kw))
        return calls[-1]

    monkeypatch.setattr(natd, "split_plan", spy)
    return calls


# (page, Sq, group, dtype): contiguous and paged caches of whole-step pages (16, 64) and of
# per-key pages (1, 8, 24); Sq 1 and 3 (causal rows end-aligned), GQA 1, 4, 8 (32 rows: 2 tiles).
SPLIT_CASES = [
    (None, 1, 4, "bfloat16"),
    (None, 3, 8, "float16"),
    (16, 1, 8, "bfloat16"),
    (16, 3, 1, "float16"),
    (64, 1, 4, "float16"),
    (1, 1, 4, "bfloat16"),
    (8, 3, 4, "bfloat16"),
    (24, 1, 8, "float16"),
]


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("splits", [None, 1, 3], ids=["policy", "one", "three"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(("page", "sq", "group", "dtype"), SPLIT_CASES)
def test_decode_split_kernel(
    monkeypatch: pytest.MonkeyPatch, split_calls: list[Any], page: int | None, sq: int,
    group: int, dtype: str, causal: bool, splits: int | None,
) -> None:  # fmt: skip
    monkeypatch.setattr(natd, "NUM_SPLITS", splits)
    rng = np.random.default_rng(seed("nsplit", page, sq, group, dtype, causal, splits))
    lens = np.array([4097, 1000, 17, 1, 2, 0], np.int32)  # 2 < Sq: a causal row without keys
    q, kc, vc, table = decode_inputs(rng, lens.size, 2, group, sq, 128, 4097, dtype, page)
    bt = None if table is None else _up(table)
    out = _poison(q.shape, dtype)
    r = gp.sdpa_decode(_tm(q), _up(kc), _up(vc), _up(lens), block_table=bt, causal=causal, out=out)
    assert r is out and len(split_calls) == 1
    if splits is not None:  # 1-slot pages: 4097 entries need at least 3 splits
        assert split_calls[0].splits == (max(splits, 3) if page == 1 else splits)
    assert_close(r, ref_decode(q, kc, vc, lens, table, causal), dtype)
    # The counters were left at 0: the same call again gives the same bits.
    again = gp.sdpa_decode(_tm(q), _up(kc), _up(vc), _up(lens), block_table=bt, causal=causal)
    np.testing.assert_array_equal(again.to_numpy(), r.to_numpy())


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("d", [64, 80, 96, 256])
def test_decode_split_kernel_head_dims(split_calls: list[Any], d: int) -> None:
    rng = np.random.default_rng(seed("nsplit-d", d))
    q = rand(rng, (2, 16, 2, d), "bfloat16")
    kc, vc = rand(rng, (2, 4, 3000, d), "bfloat16"), rand(rng, (2, 4, 3000, d), "bfloat16")
    kp, vp, table = to_paged(rng, 16, kc, vc)
    lens = np.array([3000, 1234], np.int32)
    r = gp.sdpa_decode(_up(q), _up(kp), _up(vp), _up(lens), block_table=_up(table), scale=0.07)
    assert split_calls and split_calls[0].splits > 1
    assert_close(r, ref_decode(q, kp, vp, lens, table, True, 0.07), "bfloat16")


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("splits", [1, 4], ids=["one", "four"])
def test_decode_split_kernel_bad_lengths_and_blocks_give_nan(
    monkeypatch: pytest.MonkeyPatch, split_calls: list[Any], splits: int
) -> None:
    monkeypatch.setattr(natd, "NUM_SPLITS", splits)
    rng = np.random.default_rng(12)
    q = rand(rng, (4, 8, 1, 64), "float16")
    kc, vc = rand(rng, (4, 2, 512, 64), "float16"), rand(rng, (4, 2, 512, 64), "float16")
    kp, vp, table = to_paged(rng, 16, kc, vc)
    lens = np.array([512, 513, -1, 300], np.int32)
    table[3, 17] = kp.shape[0]  # sequence 3 reads block 17 (keys 272..287): out of the cache
    table[0, 31] = -5  # sequence 0's last page: a bad id past nothing (all 512 keys are read)
    r = gp.sdpa_decode(_up(q), _up(kp), _up(vp), _up(lens), block_table=_up(table)).to_numpy()
    assert split_calls[0].splits == splits
    assert np.isnan(r).all(axis=(1, 2, 3)).tolist() == [True, True, True, True]
    table[0, 31] = kp.shape[0] - 1  # a readable block: sequence 0 is finite again
    lens[1:] = 7
    table[3, 17] = 0
    r = gp.sdpa_decode(_up(q), _up(kp), _up(vp), _up(lens), block_table=_up(table)).to_numpy()
    assert_close(r, ref_decode(q, kp, vp, lens, table, True), "float16")


@gpu
@pytest.mark.usefixtures("forced")
def test_decode_split_kernel_replays_in_a_graph_with_new_lengths(split_calls: list[Any]) -> None:
    rng = np.random.default_rng(13)
    q = rand(rng, (2, 32, 1, 128), "bfloat16")
    kc, vc = rand(rng, (2, 8, 4096, 128), "bfloat16"), rand(rng, (2, 8, 4096, 128), "bfloat16")
    kp, vp, table = to_paged(rng, 16, kc, vc)
    lens = np.array([4096, 4096], np.int32)
    dq, dk, dv, dl, dt = _up(q), _up(kp), _up(vp), _up(lens), _up(table)
    g, s = gp.CUDAGraph("cuda:0"), gp.Stream(device=0)
    with g.capture(s):
        out = gp.sdpa_decode(dq, dk, dv, dl, block_table=dt)
    assert split_calls[0].splits > 1
    for n in ([4096, 4096], [1000, 4095], [7, 0], [1, 2500]):
        lens = np.array(n, np.int32)
        dl[:] = lens
        g.replay()
        assert_close(out, ref_decode(q, kp, vp, lens, table, True), "bfloat16")


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("length", [1, 40, 300, 1000, 2000, 4096])
def test_decode_split_kernel_spreads_a_short_sequence(
    monkeypatch: pytest.MonkeyPatch, split_calls: list[Any], length: int
) -> None:
    """A sequence far shorter than its 4096-slot cache spreads over the splits: the call equals,
    bit for bit, a launch over a cache cut to the chunk the rule gives (scratch.split_chunk)
    times the splits, with that split forced, and the float64 reference."""
    rng = np.random.default_rng(seed("nsplit-spread", length))
    q = rand(rng, (1, 32, 1, 128), "bfloat16")
    kc, vc = rand(rng, (1, 8, 4096, 128), "bfloat16"), rand(rng, (1, 8, 4096, 128), "bfloat16")
    lens = np.array([length], np.int32)
    r = gp.sdpa_decode(_up(q), _up(kc), _up(vc), _up(lens))
    assert_close(r, ref_decode(q, kc, vc, lens, None, True), "bfloat16")
    pl = split_calls[0]
    assert pl.splits > 1 and pl.floor < pl.chunk
    keys = scratch.split_chunk(length, scratch.KeySplits(pl.splits, pl.chunk, pl.floor), 16)
    cut = keys * pl.splits
    monkeypatch.setattr(natd, "NUM_SPLITS", pl.splits)
    short = gp.sdpa_decode(
        _up(q), _up(kc[:, :, :cut].copy()), _up(vc[:, :, :cut].copy()), _up(lens)
    )
    assert split_calls[1].chunk == keys and split_calls[1].floor == keys
    np.testing.assert_array_equal(short.to_numpy(), r.to_numpy())


@gpu
@pytest.mark.usefixtures("forced")
def test_decode_other_layouts_run_the_row_kernel(split_calls: list[Any]) -> None:
    """A cache whose head dim is not unit-stride (a transposed view) is served by the row
    kernel, with the same result."""
    rng = np.random.default_rng(14)
    q = rand(rng, (1, 8, 1, 64), "bfloat16")
    kc, vc = rand(rng, (1, 2, 300, 64), "bfloat16"), rand(rng, (1, 2, 300, 64), "bfloat16")
    lens = np.array([300], np.int32)
    kt = _up(np.ascontiguousarray(np.swapaxes(kc, 2, 3))).transpose(0, 1, 3, 2)
    r = gp.sdpa_decode(_up(q), kt, _up(vc), _up(lens))
    assert split_calls == []
    assert_close(r, ref_decode(q, kc, vc, lens, None, True), "bfloat16")
