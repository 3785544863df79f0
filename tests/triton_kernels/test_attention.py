"""Triton sdpa (flash-attention forward) against a float64 NumPy reference.

Under the interpreter (fp32, small shapes) the tests force small tiles (AttnConfig) so several
query tiles, key blocks, the unmasked/masked loop split and the head sections all run; on the
GPU the CONFIGS table's own tiles run at the issue's lengths (1, 17, 1000, 4097)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _attention_ref import sdpa_ref as _ref
from _data import rand, seed
from _tkutil import FLOATS, GPU, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.array import GPUArray
from pygpukit.backends.triton_kernels import attention as attn
from pygpukit.backends.triton_kernels.attention import AttnConfig, _sdpa, sdpa


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
HEAD_DIMS = [64, 80, 96, 128, 256]


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
    """64/128/256 fill BLOCK_D; 80 and 96 run padded to 128 with masked loads. A negative scale
    takes the kernel's negate-q path."""
    q, k, v = _qkv(("dims", dtype, d), dtype, 1, 4, 2, 7, 26, d)
    for causal, scale in ((True, 0.3), (False, -0.2)):
        out = poisoned(q.shape, dtype, device)
        sdpa(up(q, device), up(k, device), up(v, device), causal=causal, scale=scale, out=out)
        assert_close(out, _ref(q, k, v, causal, scale), dtype)


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


# Forced small tiles for the interpreter: several query tiles and key blocks per head, BLOCK_N
# below, equal to and above BLOCK_M, pointer and descriptor loads.
SMALL_TILES = [
    AttnConfig(16, 16, 4, 2),
    AttnConfig(32, 16, 4, 2),
    AttnConfig(16, 32, 4, 2),
    AttnConfig(32, 32, 4, 2, "desc"),
    AttnConfig(64, 16, 4, 2, "desc"),
]


def _cfg_id(c: AttnConfig) -> str:
    return f"m{c.block_m}n{c.block_n}{c.loads}"


@pytest.mark.parametrize(
    "shape",
    [(1, 4, 1, 45, 45, 40), (2, 2, 2, 30, 71, 64), (1, 8, 2, 50, 20, 24), (3, 3, 3, 40, 40, 16)],
    ids=["mqa", "chunk", "sk<sq", "sections"],
)
@pytest.mark.parametrize("cfg", SMALL_TILES, ids=_cfg_id)
@pytest.mark.parametrize("dtype", FLOATS)
def test_tiles(device: str, dtype: str, cfg: AttnConfig, shape: tuple) -> None:
    """The unmasked/masked key-loop split, the causal band crossing key blocks, keys past the
    last full block, rows that see no key, GQA rows packed across tile edges, head sections
    (9 kv heads: sections of 3 under the interpreter), padded head dims (40, 24)."""
    b, h, hkv, sq, sk, d = shape
    q, k, v = _qkv(("tiles", dtype, shape, _cfg_id(cfg)), dtype, b, h, hkv, sq, sk, d)
    for causal in (True, False):
        out = poisoned(q.shape, dtype, device)
        args = (up(q, device), up(k, device), up(v, device))
        _sdpa(*args, causal=causal, scale=None, out=out, num_splits=1, config=cfg)
        assert_close(out, _ref(q, k, v, causal), dtype)


@pytest.mark.parametrize("loads", ["ptr", "desc"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_token_major_no_copy(
    device: str, dtype: str, loads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[B, S, H, D] memory (a fused QKV projection's output) passed as [B, H, S, D] views: q, k
    and v are slices of one qkv buffer, out a view of a [B, S, H, D] buffer. Nothing is copied
    or allocated; descriptor loads serve these strides (16-byte aligned, unit D stride)."""
    rng = np.random.default_rng(seed("bshd", dtype, loads))
    b, s, h, hkv, d = 2, 37, 4, 2, 80
    qkv = rand(rng, (b, s, h + 2 * hkv, d), dtype)
    dev = up(qkv, device)
    qd, kd, vd = (
        dev[:, :, lo:hi].transpose(0, 2, 1, 3) for lo, hi in ((0, h), (h, h + hkv), (h + hkv, None))
    )
    out_buf = poisoned((b, s, h, d), dtype, device)
    out = out_buf.transpose(0, 2, 1, 3)
    cfg = AttnConfig(32, 16, 4, 2, loads)
    assert attn._use_desc(cfg, kd, vd) == (loads == "desc")

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("sdpa copied or allocated")

    monkeypatch.setattr(GPUArray, "contiguous", fail)
    monkeypatch.setattr(attn, "empty", fail)
    assert _sdpa(qd, kd, vd, causal=True, scale=None, out=out, num_splits=1, config=cfg) is out
    monkeypatch.undo()
    q, k, v = (qkv[:, :, sl].transpose(0, 2, 1, 3) for sl in
               (slice(0, h), slice(h, h + hkv), slice(h + hkv, None)))  # fmt: skip
    assert_close(out_buf.to_numpy().transpose(0, 2, 1, 3), _ref(q, k, v, True), dtype)


def test_desc_eligibility(device: str) -> None:
    """Descriptor loads need a unit D stride and 16-byte aligned strides and base address."""
    x = up(np.zeros((2, 3, 8, 80), np.float32), device)
    assert attn._desc_ok(x)
    assert not attn._desc_ok(x[..., ::2])  # D stride 2
    assert not attn._desc_ok(x[..., 1:])  # base 4 bytes past an aligned address
    assert not attn._desc_ok(up(np.zeros((2, 8, 7), np.float32), device))  # 28-byte rows
    assert attn._desc_ok(up(np.zeros((2, 8, 8), np.float16), device))
    cfg = AttnConfig(32, 16, 4, 2, "desc")
    assert not attn._use_desc(cfg, x, x[..., ::2]) and attn._use_desc(cfg, x, x)
    assert not attn._use_desc(AttnConfig(32, 16, 4, 2), x, x)


def test_config_table() -> None:
    """Every (BLOCK_D, bits, causal) key the launcher can ask for is in CONFIGS; few rows shrink
    the tile (decode), many rows take the entry as it is."""
    for bd in (64, 128, 256):
        for bits in (16, 32):
            for causal in (True, False):
                c = attn.CONFIGS[(bd, bits, causal)]
                assert c.loads in ("ptr", "desc") and c.block_m in (16, 32, 64, 128)
                assert attn.pick_config(1 << 20, bd, bits, causal) is c
    small = attn.pick_config(8, 128, 16, True)
    assert small.block_m == 16 and small.num_warps <= 4
    assert attn.pick_config(40, 256, 16, True).block_m == 64
    assert attn.pick_config(32, 16, 16, False).block_m == 32  # D <= 64 share the 64 entry


LENGTHS = [1, 17, 1000, 4097]


@GPU
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_lengths(device: str, dtype: str, length: int, group: int, causal: bool) -> None:
    """The issue's prefill lengths and GQA ratios at D=128 with the table's configs."""
    h = 8
    q, k, v = _qkv(("lengths", dtype, length, group, causal), dtype, 1, h, h // group, length,
                   length, 128)  # fmt: skip
    out = poisoned(q.shape, dtype, device)
    sdpa(up(q, device), up(k, device), up(v, device), causal=causal, out=out)
    assert_close(out, _ref(q, k, v, causal), dtype)


@GPU
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_head_dims_prefill(device: str, dtype: str, d: int) -> None:
    """Every head dim at length 1000 (several tiles, a key tail), causal and not, GQA 4."""
    q, k, v = _qkv(("dims1000", dtype, d), dtype, 2, 8, 2, 1000, 1000, d)
    for causal in (True, False):
        out = poisoned(q.shape, dtype, device)
        sdpa(up(q, device), up(k, device), up(v, device), causal=causal, out=out)
        assert_close(out, _ref(q, k, v, causal), dtype)


@GPU
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_chunked_prefill(device: str, dtype: str) -> None:
    """A block of queries at the end of a longer key sequence (chunked prefill)."""
    for sq, sk, group in ((1000, 4097, 4), (17, 1000, 8), (129, 130, 1)):
        q, k, v = _qkv(("chunked", dtype, sq, sk), dtype, 1, 8, 8 // group, sq, sk, 128)
        out = poisoned(q.shape, dtype, device)
        sdpa(up(q, device), up(k, device), up(v, device), causal=True, out=out)
        assert_close(out, _ref(q, k, v, True), dtype)


# Configurations benchmarks/tuning/tune_attention.py may put in CONFIGS, checked on the GPU.
GPU_TILES = [
    AttnConfig(128, 64, 8, 3, "desc"),
    AttnConfig(128, 128, 8, 2, "desc"),
    AttnConfig(128, 128, 8, 2, "ptr"),
    AttnConfig(64, 64, 4, 3, "ptr"),
    AttnConfig(64, 128, 4, 2, "desc"),
]


@GPU
@pytest.mark.parametrize("d", [64, 80, 128])
@pytest.mark.parametrize("cfg", GPU_TILES, ids=_cfg_id)
def test_gpu_tiles(device: str, cfg: AttnConfig, d: int) -> None:
    q, k, v = _qkv(("gputiles", d), "bfloat16", 2, 8, 2, 1000, 1000, d)
    for causal in (True, False):
        out = poisoned(q.shape, "bfloat16", device)
        args = (up(q, device), up(k, device), up(v, device))
        _sdpa(*args, causal=causal, scale=None, out=out, num_splits=1, config=cfg)
        assert_close(out, _ref(q, k, v, causal), "bfloat16")


@pytest.mark.parametrize("section", [1, 2, 4, 100])
def test_head_sections(device: str, section: int) -> None:
    """Any heads-per-section count covers every (tile, head) once: 9 kv heads in sections of
    1, 2 (last one short), 4 and all."""
    q, k, v = _qkv(("sections", section), "float32", 3, 6, 3, 20, 20, 16)
    cfg = AttnConfig(16, 16, 4, 2, head_section=section)
    out = poisoned(q.shape, "float32", device)
    _sdpa(up(q, device), up(k, device), up(v, device), causal=True, scale=None, out=out,
          num_splits=1, config=cfg)  # fmt: skip
    assert_close(out, _ref(q, k, v, True), "float32")
