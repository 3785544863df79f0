"""Triton sdpa_varlen (packed variable-length flash attention) against a float64 reference.

The interpreter runs fp32 at small lengths with forced small tiles; the GPU runs the issue's
lengths 1, 17, 1000 and 4097 mixed in one batch, GQA 1/4/8, causal and not, every head dim.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _attention_ref import packed, varlen_ref
from _data import rand, seed
from _tkutil import FLOATS, GPU, poisoned, up

import pygpukit as gp
from pygpukit.backends.triton_kernels.attention import AttnConfig, _sdpa, sdpa_varlen

TILES = [AttnConfig(16, 16, 4, 2), AttnConfig(32, 16, 4, 2, "desc"), AttnConfig(16, 32, 4, 2)]
# (lens_q, lens_k): self-attention, chunked prefill (queries at the end of longer keys), and
# sequences with fewer keys than queries, an empty sequence, one-token sequences.
LENGTHS = {
    "self": ([1, 17, 26, 5], [1, 17, 26, 5]),
    "chunked": ([3, 17, 1, 20], [40, 17, 9, 33]),
    "ragged": ([9, 0, 1, 30], [4, 6, 0, 12]),
}


def _run(device: str, q, k, v, cu_q, cu_k, causal, cfg=None, scale=None, out=None):  # type: ignore[no-untyped-def]
    mq = int(np.diff(cu_q).max())
    mk = int(np.diff(cu_k).max())
    args = (up(q, device), up(k, device), up(v, device), up(cu_q, device), up(cu_k, device))
    return sdpa_varlen(*args, max_seqlen_q=mq, max_seqlen_k=mk, causal=causal, scale=scale,
                       out=out, config=cfg)  # fmt: skip


@pytest.mark.parametrize("cfg", TILES, ids=lambda c: f"m{c.block_m}n{c.block_n}{c.loads}")
@pytest.mark.parametrize("lengths", list(LENGTHS), ids=str)
@pytest.mark.parametrize("group", [1, 4, pytest.param(8, marks=GPU)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_varlen(device: str, dtype: str, group: int, lengths: str, cfg: AttnConfig) -> None:
    lens_q, lens_k = LENGTHS[lengths]
    rng = np.random.default_rng(seed("tvarlen", dtype, group, lengths, cfg.loads, cfg.block_m))
    hkv = 2
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, hkv * group, hkv, 24, dtype)
    for causal in (True, False):
        out = poisoned(q.shape, dtype, device)
        assert _run(device, q, k, v, cu_q, cu_k, causal, cfg, out=out) is out
        assert_close(out, varlen_ref(q, k, v, cu_q, cu_k, causal), dtype)


@pytest.mark.parametrize("d", [64, 80, 96, 128, 256])
def test_varlen_head_dims(device: str, d: int) -> None:
    rng = np.random.default_rng(seed("tvarlen-d", d))
    q, k, v, cu_q, cu_k = packed(rng, [5, 1, 12], [8, 1, 12], 4, 1, d, "float32")
    for causal, scale in ((True, None), (False, -0.4)):
        out = _run(device, q, k, v, cu_q, cu_k, causal, scale=scale)
        assert_close(out, varlen_ref(q, k, v, cu_q, cu_k, causal, scale), "float32")


def test_equals_per_sequence_sdpa(device: str) -> None:
    """A varlen batch gives exactly what sdpa gives each sequence alone (same tiles, no split:
    the same arithmetic in the same order)."""
    rng = np.random.default_rng(seed("tvarlen-eq"))
    lens_q, lens_k = [7, 21, 1], [7, 37, 20]
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, 8, 2, 32, "float32")
    cfg = AttnConfig(16, 16, 4, 2)
    for causal in (True, False):
        got = _run(device, q, k, v, cu_q, cu_k, causal, cfg).to_numpy()
        for b in range(len(lens_q)):
            qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
            one = _sdpa(
                up(q[qs].transpose(1, 0, 2), device), up(k[ks].transpose(1, 0, 2), device),
                up(v[ks].transpose(1, 0, 2), device), causal=causal, scale=None, out=None,
                num_splits=1, config=cfg,
            ).to_numpy()  # fmt: skip
            np.testing.assert_array_equal(got[qs], one.transpose(1, 0, 2))


def test_strided_inputs_and_offsets(device: str) -> None:
    """q/k/v as head slices of one packed qkv buffer, cu_seqlens as strided views, out= a
    strided view: everything read and written in place."""
    rng = np.random.default_rng(seed("tvarlen-views"))
    h, hkv, d = 4, 2, 16
    cu = np.array([0, 6, 6, 19], np.int32)
    qkv = rand(rng, (19, h + 2 * hkv, d), "float32")
    dev = up(qkv, device)
    qd, kd, vd = dev[:, :h], dev[:, h : h + hkv], dev[:, h + hkv :]
    cu_wide = up(np.repeat(cu, 2), device)[::2]  # stride 2
    assert not cu_wide.is_contiguous()
    out_wide = poisoned((19, h, 2 * d), "float32", device)
    out = out_wide[:, :, ::2]
    sdpa_varlen(qd, kd, vd, cu_wide, cu_wide, max_seqlen_q=13, max_seqlen_k=13, out=out)
    ref = varlen_ref(qkv[:, :h], qkv[:, h : h + hkv], qkv[:, h + hkv :], cu, cu, True)
    assert_close(out, ref, "float32")
    assert np.isnan(out_wide.to_numpy()[:, :, 1::2]).all()  # the gaps stay untouched


def test_routed_under_interpreter_or_gpu(device: str) -> None:
    rng = np.random.default_rng(seed("tvarlen-routed"))
    q, k, v, cu_q, cu_k = packed(rng, [3, 8], [5, 8], 4, 2, 16, "float32")
    args = (up(q, device), up(k, device), up(v, device), up(cu_q, device), up(cu_k, device))
    with gp.route(sdpa_varlen="triton"):
        o = gp.sdpa_varlen(*args, max_seqlen_q=8, max_seqlen_k=8)
    assert gp.routing.stats()["sdpa_varlen"]["triton"] >= 1
    assert_close(o, varlen_ref(q, k, v, cu_q, cu_k, True), "float32")


MIXED = [1, 17, 1000, 4097]


@GPU
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_varlen_issue_lengths(device: str, dtype: str, group: int, causal: bool) -> None:
    """Lengths 1, 17, 1000, 4097 mixed in one batch (and a chunked-prefill batch: the same
    query lengths at the end of longer keys), GQA 1/4/8, the table's configs."""
    rng = np.random.default_rng(seed("varlen-issue", dtype, group, causal))
    for lens_k in (MIXED, [4097, 1000, 1100, 4200]):
        q, k, v, cu_q, cu_k = packed(rng, MIXED, lens_k, 8, 8 // group, 128, dtype)
        out = poisoned(q.shape, dtype, device)
        _run(device, q, k, v, cu_q, cu_k, causal, out=out)
        assert_close(out, varlen_ref(q, k, v, cu_q, cu_k, causal), dtype)


@GPU
@pytest.mark.parametrize("d", [64, 80, 96, 128, 256])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_varlen_head_dims_gpu(device: str, dtype: str, d: int) -> None:
    rng = np.random.default_rng(seed("varlen-d", dtype, d))
    q, k, v, cu_q, cu_k = packed(rng, [1000, 17, 1, 300], [1000, 40, 1, 300], 8, 2, d, dtype)
    for causal in (True, False):
        out = _run(device, q, k, v, cu_q, cu_k, causal)
        assert_close(out, varlen_ref(q, k, v, cu_q, cu_k, causal), dtype)


@GPU
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_varlen_matches_sdpa_gpu(device: str, dtype: str) -> None:
    """Each sequence of a varlen batch against gp.sdpa of that sequence alone (default
    configs on both sides; they may tile differently, so within the dtype's bound)."""
    rng = np.random.default_rng(seed("varlen-vs-sdpa", dtype))
    lens_q, lens_k = [1, 17, 1000], [1, 17, 1200]
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, 16, 4, 128, dtype)
    got = _run(device, q, k, v, cu_q, cu_k, True).to_numpy()
    for b in range(3):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        one = gp.sdpa(
            up(q[qs], device).transpose(1, 0, 2), up(k[ks], device).transpose(1, 0, 2),
            up(v[ks], device).transpose(1, 0, 2),
        ).to_numpy()  # fmt: skip
        assert_close(got[qs], one.transpose(1, 0, 2).astype(np.float64), dtype)
