"""GGUF block weights through the public API on the test device (ops/_helpers.DEVICE):
QuantizedWeight's checks, gp.quantize_weight to the gguf-quantizable formats (the gguf package's
blocks byte for byte), gp.dequantize_gguf (the gguf package's values bit for bit, all rows and
rows by id) and gp.linear_quantized with a GGUF weight (the float64 product: exact after one
rounding on the CPU, within the dtype's bound on a GPU), plus the errors for bad arguments."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from _assert import assert_close
from _gguf_ref import FORMATS, random_blocks, reference

import pygpukit as gp
from ops._helpers import DEVICE, up
from pygpukit._gguf_planes import to_blocks
from pygpukit.backends.cpu.gemv import round_to
from pygpukit.ops.gguf import STREAM_MAX_ROWS
from pygpukit.qweight import GGUF_BLOCKS

GPU_HALF = ["bfloat16", "float16"] if DEVICE != "cpu" else []


def _qw(fmt: str, n: int, k: int, seed: int = 0) -> tuple[gp.QuantizedWeight, np.ndarray]:
    raw = random_blocks(fmt, n, k, seed=seed)
    return gp.QuantizedWeight(fmt, up(raw)), raw


@pytest.mark.parametrize("fmt", FORMATS)
def test_weight_shape_bytes_and_host_values(fmt: str) -> None:
    qk, bb = GGUF_BLOCKS[fmt]
    qw, raw = _qw(fmt, 6, 2 * qk)
    assert qw.shape == (6, 2 * qk) and qw.block == qk and qw.is_gguf
    assert qw.nbytes == 6 * 2 * bb and qw.scales is None
    assert (qw.dequantize() == reference(raw, fmt).astype(np.float64)).all()
    assert fmt in repr(qw)


@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_gguf_bits(fmt: str) -> None:
    qk = GGUF_BLOCKS[fmt][0]
    qw, raw = _qw(fmt, 9, 3 * qk, seed=4)
    got = gp.dequantize_gguf(qw).to_numpy()
    assert got.dtype == np.float32
    assert got.view(np.uint32).tolist() == reference(raw, fmt).view(np.uint32).tolist()


def test_dequantize_gguf_ids_and_dtype() -> None:
    qw, raw = _qw("q5_1", 8, 64, seed=2)
    ids = up(np.array([[7, 1], [1, 0]], dtype=np.int32))
    got = gp.dequantize_gguf(qw, ids, dtype="bfloat16")
    assert got.shape == (2, 2, 64) and got.dtype.name == "bfloat16"
    want = round_to(reference(raw, "q5_1")[[[7, 1], [1, 0]]].astype(np.float64), got.dtype.np_dtype)
    assert (got.to_numpy() == want).all()


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])
def test_quantize_weight_is_ggufs_quantizer(fmt: str) -> None:
    w = np.random.default_rng(3).standard_normal((5, 96)).astype(np.float32)
    qw = gp.quantize_weight(w, fmt)
    want = gguf.quants.quantize(w, gguf.GGMLQuantizationType[fmt.upper()])
    assert (to_blocks(fmt, qw.data.to_numpy()) == want).all() and qw.shape == (5, 96)


def _exact(y: gp.GPUArray, x: np.ndarray, raw: np.ndarray, fmt: str, b: np.ndarray | None) -> None:
    ref = x.astype(np.float64) @ reference(raw, fmt).astype(np.float64).T
    if b is not None:
        ref = ref + b.astype(np.float64)
    if DEVICE == "cpu":
        got = y.to_numpy()
        assert (got == round_to(ref, got.dtype)).all()
    else:
        assert_close(y, ref, y.dtype)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["float32", *GPU_HALF])
@pytest.mark.parametrize("rows", [(1,), (2, 3), (40,)])
def test_linear_quantized_gguf(fmt: str, dtype: str, rows: tuple[int, ...]) -> None:
    qk = GGUF_BLOCKS[fmt][0]
    k = qk if qk == 256 else 4 * qk
    qw, raw = _qw(fmt, 13, k, seed=len(rows))
    rng = np.random.default_rng(5)
    x = up(rng.standard_normal((*rows, k)).astype(np.float32)).astype(dtype)
    b = up(rng.standard_normal(13).astype(np.float32)).astype(dtype)
    y = gp.linear_quantized(x, qw, b)
    assert y.shape == (*rows, 13) and y.dtype.name == dtype
    xs, bs = x.astype("float32").to_numpy(), b.astype("float32").to_numpy()
    if int(np.prod(rows)) <= STREAM_MAX_ROWS:
        _exact(y, xs, raw, fmt, bs)
        return
    # More rows: W rounded to x's dtype, in the tensor-core kernel (3-16 rows of half x) or
    # dequantized, then gp.linear (its own dtype bound).
    ref = xs.astype(np.float64) @ reference(raw, fmt).astype(np.float64).T + bs
    assert_close(y, ref, dtype)
    with gp.deterministic():  # the one-kernel path: the product rounded once on the CPU
        _exact(gp.linear_quantized(x, qw, b), xs, raw, fmt, bs)


@pytest.mark.skipif(not GPU_HALF, reason="half x needs a GPU")
@pytest.mark.parametrize("fmt", ["q4_k", "q8_0", "q6_k", "q3_k"])
@pytest.mark.parametrize("rows", [3, 16, 17])
def test_linear_quantized_gguf_half_paths(
    fmt: str, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3-16 rows of half x on a W wide enough for the device take the tensor-core kernel (W's
    tiles rounded to x's dtype), narrower W or more rows dequantize W and run gp.linear (seen
    by counting the dequantizations): each within x's dtype of the float64 product, with a bias
    and a strided x."""
    import pygpukit.ops.gguf as og

    qk = GGUF_BLOCKS[fmt][0]
    k = qk if qk == 256 else 8 * qk
    qw, raw = _qw(fmt, 75, k, seed=rows)
    rng = np.random.default_rng(rows)
    wide = up(rng.standard_normal((rows, 2 * k)).astype(np.float32)).astype("bfloat16")
    x = wide[:, ::2]
    b = up(rng.standard_normal(75).astype(np.float32)).astype("bfloat16")
    ref = (
        x.astype("float32").to_numpy().astype(np.float64) @ reference(raw, fmt).T.astype(np.float64)
        + b.astype("float32").to_numpy()
    )
    calls: list[int] = []
    real = og.dequantize_gguf
    monkeypatch.setattr(og, "dequantize_gguf", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    for per_sm in (0, 1 << 30):  # every W wide enough / none
        monkeypatch.setattr(og, "TENSOR_CORE_MIN_COLUMNS_PER_SM", per_sm)
        calls.clear()
        assert_close(gp.linear_quantized(x, qw, b), ref, "bfloat16")
        assert len(calls) == (0 if per_sm == 0 and rows <= og.TENSOR_CORE_MAX_ROWS else 1)


@pytest.mark.parametrize("lead", [(1, 2), (2, 3)])
def test_linear_quantized_gguf_out_column_slice(lead: tuple[int, int]) -> None:
    """out a column slice of a wider array (how q, k and v of different formats fill one
    projection): the streamed rows and the dequantize + gp.linear rows."""
    qw, raw = _qw("q8_0", 6, 64)
    x = up(np.random.default_rng(0).standard_normal((*lead, 64)).astype(np.float32))
    outer = up(np.full((*lead, 10), 7.0, np.float32))
    y = gp.linear_quantized(x, qw, out=outer[:, :, 2:8])
    if int(np.prod(lead)) <= STREAM_MAX_ROWS:
        _exact(y, x.to_numpy(), raw, "q8_0", None)
    else:
        ref = x.to_numpy().astype(np.float64) @ reference(raw, "q8_0").astype(np.float64).T
        assert_close(y, ref, "float32")
    o = outer.to_numpy()
    assert (o[..., :2] == 7).all() and (o[..., 8:] == 7).all()


@pytest.mark.skipif(not GPU_HALF, reason="half x needs a GPU")
@pytest.mark.parametrize("fmt", ["q4_k", "q6_k", "q4_0", "q2_k"])
@pytest.mark.parametrize("dtype", GPU_HALF)
def test_moe_linear_quantized_experts_each_path(
    fmt: str, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half x through each path of GGUF experts, with the routing weight, each within x's dtype
    of the float64 product: few rows an expert (the tensor-core kernel, block_m 16 and 64, and
    one token under EXPERTS_DENSE_MIN_ROWS), that many or more (the experts dequantized, then
    the dense grouped product; w alone when its copy fits EXPERTS_DENSE_MAX_BYTES but w with
    w_up does not), a copy over the cap or the deterministic mode (the kernel again). Which path
    ran is seen by counting the dequantizations."""
    from contextlib import nullcontext

    from _moe_ref import moe_linear as ref_moe

    import pygpukit.ops.moe as om

    calls: list[int] = []
    real = om.dequantize_gguf
    monkeypatch.setattr(om, "dequantize_gguf", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    e, n, k, top = 4, 40, 512, 2
    raw = random_blocks(fmt, e * n, k, seed=3, scale=0.002)  # silu(g) * u stays in float16
    raw_up = random_blocks(fmt, e * n, k, seed=4, scale=0.002)
    w = gp.QuantizedWeight.from_blocks(fmt, raw, device=DEVICE, experts=e)
    wu = gp.QuantizedWeight.from_blocks(fmt, raw_up, device=DEVICE, experts=e)
    wr, ur = reference(raw, fmt).reshape(e, n, k), reference(raw_up, fmt).reshape(e, n, k)
    many = -(-om.EXPERTS_DENSE_MIN_ROWS * e // top)  # tokens for the dense path
    cap = om.EXPERTS_DENSE_MAX_BYTES
    one_copy = e * n * k * 2  # w alone in x's dtype: within it, w with w_up beside it is not
    cases = [  # (tokens, block_m, byte cap, deterministic, gated, dequantizations)
        (37, 16, cap, False, True, 0),
        (37, 64, cap, False, True, 0),
        (many - 1, 64, cap, False, True, 0),  # just under EXPERTS_DENSE_MIN_ROWS an expert
        (many, 64, cap, False, True, 2),
        (many, 64, one_copy, False, True, 0),
        (many, 64, one_copy, False, False, 1),
        (many, 128, 0, False, True, 0),
        (many, 16, cap, True, True, 0),
    ]
    for t, bm, cap_bytes, det, gated, dequantized in cases:
        monkeypatch.setattr(om, "EXPERTS_DENSE_MAX_BYTES", cap_bytes)
        rng = np.random.default_rng(t)
        x = up(rng.standard_normal((t, k)).astype(np.float32)).astype(dtype)
        ids = rng.integers(0, e, (t, top)).astype(np.int32)
        scale = rng.uniform(0.5, 1.0, t * top).astype(np.float32)
        ref = ref_moe(x.astype("float32").to_numpy(), wr, ids, top, ur if gated else None, scale)
        rows, be = gp.moe_align(up(ids), e, bm)
        calls.clear()
        with gp.deterministic() if det else nullcontext():
            y = gp.moe_linear(x, w, rows, be, top, w_up=wu if gated else None, row_scale=up(scale))
        assert_close(y, ref, dtype)
        assert len(calls) == dequantized, (t, bm, cap_bytes, det, gated)


def test_blocks_round_trip_and_empty_weights() -> None:
    qw, raw = _qw("q6_k", 3, 512, seed=8)
    assert (qw.blocks() == raw).all()
    again = gp.QuantizedWeight(qw.format, qw.blocks())
    assert (again.data.to_numpy() == qw.data.to_numpy()).all()
    empty = gp.QuantizedWeight.from_blocks("q4_k", np.zeros((0, 144), np.uint8), device=DEVICE)
    assert empty.shape == (0, 256) and gp.dequantize_gguf(empty).shape == (0, 256)
    y = gp.linear_quantized(up(np.ones((2, 256), np.float32)), empty)
    assert y.shape == (2, 0)
    rows = gp.dequantize_gguf(qw, up(np.zeros((0, 3), np.int64)))
    assert rows.shape == (0, 3, 512)
    assert gp.quantize_weight(np.ones((0, 32), np.float32), "q8_0", device=DEVICE).shape == (0, 32)


@pytest.mark.parametrize(("fmt", "value"), [("q8_0", 1e7), ("q4_0", 1e6), ("q4_1", 1e6)])
def test_quantize_weight_refuses_a_scale_beyond_float16(fmt: str, value: float) -> None:
    w = np.ones((2, 64), np.float32)
    w[1, 40] = value
    with pytest.raises(ValueError, match=r"w\[1, 3\d\] is in a block whose .* overflows float16"):
        gp.quantize_weight(w, fmt)


def test_bad_arguments() -> None:
    raw = up(random_blocks("q4_k", 2, 256))
    with pytest.raises(ValueError, match="whole blocks of 144 bytes"):
        gp.QuantizedWeight("q4_k", raw[:, :100].contiguous())
    with pytest.raises(TypeError, match="uint8"):
        gp.QuantizedWeight("q4_k", raw.astype("int32"))
    with pytest.raises(ValueError, match="scales inside the blocks"):
        gp.QuantizedWeight("q4_k", raw, raw)
    with pytest.raises(ValueError, match="format must be one of"):
        gp.QuantizedWeight("iq4_xs", raw)
    with pytest.raises(ValueError, match="k-quant weights come from GGUF files"):
        gp.quantize_weight(np.zeros((2, 256), np.float32), "q4_k")
    with pytest.raises(ValueError, match="% 32 == 0"):
        gp.quantize_weight(np.zeros((2, 48), np.float32), "q8_0")
    with pytest.raises(ValueError, match="from_blocks: format must be one of"):
        gp.QuantizedWeight.from_blocks("iq4_xs", raw.to_numpy())
    with pytest.raises(ValueError, match="format must be one of"):
        gp.QuantizedWeight(["q4_k"], raw)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a GGUF format"):
        gp.quantize_weight(np.ones((2, 32), np.float32), "fp8").blocks()
    qw = gp.QuantizedWeight("q4_k", raw)
    with pytest.raises(ValueError, match=r"\[\.\.\., 256\]"):
        gp.linear_quantized(up(np.zeros((1, 128), np.float32)), qw)
    with pytest.raises(TypeError, match="float16 or bfloat16 or float32"):
        gp.linear_quantized(up(np.zeros((1, 256), np.float64)), qw)
    with pytest.raises(TypeError, match="int32 or int64"):
        gp.dequantize_gguf(qw, up(np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match="dtype must be one of"):
        gp.dequantize_gguf(qw, dtype="int8")
    with pytest.raises(TypeError, match="GGUF format"):
        gp.dequantize_gguf(gp.quantize_weight(np.ones((2, 32), np.float32), "fp8"))
    wide = up(np.zeros((3, 4, 4), np.float32))
    with pytest.raises(ValueError, match="must collapse"):
        gp.linear_quantized(up(np.zeros((2, 2, 256), np.float32)), qw, out=wide[:2, :2, :2])
    if DEVICE == "cpu":
        with pytest.raises(IndexError, match="out of range"):
            gp.dequantize_gguf(qw, up(np.array([2], np.int64)))
    # the runtime stays usable after the failed calls
    assert gp.dequantize_gguf(qw).shape == (2, 256)


def test_moe_linear_with_quantized_experts() -> None:
    """gp.moe_linear reads GGUF-quantized experts (E stacked matrices): the float64 product of
    the experts' values; w_up must match w; bad x raises before anything runs."""
    from _moe_ref import moe_linear as ref_moe

    e, n, k, t, top = 3, 8, 64, 5, 2
    raw, raw_up = random_blocks("q8_0", e * n, k, seed=1), random_blocks("q8_0", e * n, k, seed=2)
    w = gp.QuantizedWeight.from_blocks("q8_0", raw, device=DEVICE, experts=e)
    wu = gp.QuantizedWeight.from_blocks("q8_0", raw_up, device=DEVICE, experts=e)
    assert "experts=3" in repr(w)
    rng = np.random.default_rng(0)
    x = up(rng.standard_normal((t, k)).astype(np.float32))
    ids = rng.integers(0, e, (t, top)).astype(np.int32)
    rows, be = gp.moe_align(up(ids), e, 16)
    y = gp.moe_linear(x, w, rows, be, top, w_up=wu)
    ref = ref_moe(x.to_numpy(), reference(raw, "q8_0").reshape(e, n, k), ids, top,
                  reference(raw_up, "q8_0").reshape(e, n, k))  # fmt: skip
    assert_close(y, ref, "float32")
    other = gp.QuantizedWeight.from_blocks(
        "q4_0", random_blocks("q4_0", e * n, k), DEVICE, experts=e
    )
    with pytest.raises(ValueError, match="w_up must be a QuantizedWeight like w"):
        gp.moe_linear(x, w, rows, be, top, w_up=other)
    with pytest.raises(ValueError, match="x has K=32"):
        gp.moe_linear(up(np.zeros((t, 32), np.float32)), w, rows, be, top)
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        gp.moe_linear(up(np.zeros((t, k), np.float64)), w, rows, be, top)
    with pytest.raises(ValueError, match="do not split into 5 experts"):
        gp.QuantizedWeight.from_blocks("q8_0", raw, device=DEVICE, experts=5)
    assert gp.QuantizedWeight.from_blocks("q8_0", raw, DEVICE, experts=np.int64(e)).experts == e
    with pytest.raises(TypeError, match="experts must be an int"):
        gp.QuantizedWeight.from_blocks("q8_0", raw, device=DEVICE, experts=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"blocks must be a numpy\.ndarray"):
        gp.QuantizedWeight.from_blocks("q8_0", raw.tolist(), device=DEVICE)  # type: ignore[arg-type]
