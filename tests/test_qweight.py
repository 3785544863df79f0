"""gp.quantize_weight / gp.QuantizedWeight on the CPU: round-trip error bounds of each format,
re-quantization is the identity, the packed layouts (low nibble = even k), and the checks."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit.backends.cpu.gemv import E2M1_VALUES


def _weights(tag: str, n: int = 33, k: int = 416) -> np.ndarray:
    """Normal weights with rows of very different magnitudes and a few outliers and zeros."""
    rng = np.random.default_rng(seed("qw", tag))
    w = as64(rand(rng, (n, k), "float32")) * np.exp(rng.uniform(-6, 6, (n, 1)))
    w[0, 5] *= 50.0
    w[1] = 0.0
    w[2, 128:256] = 0.0  # a zero block / group
    return w


def _per_elem(s: np.ndarray, block: int, k: int) -> np.ndarray:
    s = as64(s)
    return s.reshape(-1, 1) if block == 0 else np.repeat(s, block, axis=1)[:, :k]


@pytest.mark.parametrize("block", [None, 128])
def test_fp8_round_trip(block: int | None) -> None:
    w = _weights(f"fp8{block}")
    qw = gp.quantize_weight(w, "fp8", block=block)
    assert qw.data.dtype is gp.float8_e4m3fn and qw.scales.dtype is gp.float32
    assert qw.block == (0 if block is None else 128)
    assert qw.scales.shape == ((33,) if block is None else (33, 4))
    s = _per_elem(qw.scales.to_numpy(), qw.block, 416)
    err = np.abs(qw.dequantize() - w)
    # e4m3: 3 mantissa bits (half an ulp = 2^-4 relative), subnormal spacing 2^-9 * scale
    assert (err <= 2**-4 * np.abs(w) + 2**-10 * s).all()
    assert (qw.dequantize()[1] == 0).all()
    again = gp.quantize_weight(qw.dequantize(), "fp8", block=block)
    np.testing.assert_array_equal(
        again.data.to_numpy().view(np.uint8), qw.data.to_numpy().view(np.uint8)
    )
    np.testing.assert_array_equal(again.scales.to_numpy(), qw.scales.to_numpy())


@pytest.mark.parametrize("scale_dtype", ["float32", "bfloat16", "float16"])
def test_int4_round_trip(scale_dtype: str) -> None:
    w = _weights(f"int4{scale_dtype}") * 1e-2  # float16 scales need |w| / 7 < 65504
    qw = gp.quantize_weight(w, "int4", scale_dtype=scale_dtype)
    assert qw.data.dtype is gp.int4 and qw.scales.dtype.name == scale_dtype
    assert qw.scales.shape == (33, 4) and qw.block == 128
    q = qw.data.to_numpy().astype(np.int8)
    assert q.min() >= -8 and q.max() <= 7
    s = _per_elem(qw.scales.to_numpy(), 128, 416)
    # round to nearest with the stored scale; a scale rounded down by up to 2^-8 (bf16) can
    # push |w| / s past 7, clipped: at most 7 * 2^-8 more
    slack = 0.5 + (0.03 if scale_dtype != "float32" else 1e-6)
    assert (np.abs(qw.dequantize() - w) <= slack * s).all()
    again = gp.quantize_weight(qw.dequantize(), "int4", scale_dtype=scale_dtype)
    np.testing.assert_array_equal(again.data.to_numpy(), qw.data.to_numpy())
    np.testing.assert_array_equal(as64(again.scales.to_numpy()), as64(qw.scales.to_numpy()))


def test_nvfp4_round_trip() -> None:
    w = _weights("nvfp4")
    qw = gp.quantize_weight(w, "nvfp4")
    assert qw.data.dtype is gp.uint8 and qw.data.shape == (33, 208)
    assert qw.scales.dtype is gp.float8_e4m3fn and qw.scales.shape == (33, 26)
    g = qw.global_scale
    assert g == float(np.float32(np.abs(w).max() / (6 * 448)))
    sg = _per_elem(qw.scales.to_numpy(), 16, 416) * g
    # e2m1 steps are at most a quarter of the value above 1 (0.5 below), and a block scale
    # rounded to e4m3 can push values past 6, clipped by at most 6 * 2^-4
    assert (np.abs(qw.dequantize() - w) <= 0.25 * np.abs(w) + 0.5 * sg).all()
    again = gp.quantize_weight(qw.dequantize(), "nvfp4")
    assert again.global_scale == g
    np.testing.assert_array_equal(again.data.to_numpy(), qw.data.to_numpy())
    np.testing.assert_array_equal(as64(again.scales.to_numpy()), as64(qw.scales.to_numpy()))


@pytest.mark.parametrize("ratio", [1.0, 1e-2, 1e-4])
def test_nvfp4_stacked_halves_lose_nothing_to_the_shared_global_scale(ratio: float) -> None:
    # The engine stacks gate and up (and q/k/v) into one weight, so one float32 global scale
    # serves halves of different magnitude; the e4m3 block scales absorb ratios down to about
    # 1e-4 (past that they reach e4m3's subnormals: BENCHMARKS.md, accuracy by format).
    rng = np.random.default_rng(3)
    gate = rng.standard_normal((64, 256))
    up = rng.standard_normal((64, 256)) * ratio
    stacked = gp.quantize_weight(np.vstack([gate, up]), "nvfp4").dequantize()
    alone = gp.quantize_weight(up, "nvfp4").dequantize()

    def err(a: np.ndarray) -> float:
        return float(np.linalg.norm(a - up) / np.linalg.norm(up))

    assert err(stacked[64:]) <= 1.05 * err(alone)
    assert err(alone) < 0.2  # e2m1: a few percent a value, not a broken quantizer


def test_packed_layouts_put_even_k_in_the_low_nibble() -> None:
    k = 32
    w = np.zeros((2, k))
    w[0, 0], w[0, 1], w[1, 30], w[1, 31] = 7.0, -7.0, -1.0, 3.0
    qi = gp.quantize_weight(w, "int4")
    raw = np.zeros(32, np.uint8)  # pygpukit's int4 dtype stores the same nibble order
    q = qi.data.to_numpy().astype(np.int8)
    assert (q[0, 0], q[0, 1]) == (7, -7)
    raw_bytes = gp.from_numpy(q.astype(ml_dtypes.int4)).to_numpy().astype(np.int8)
    np.testing.assert_array_equal(raw_bytes, q)
    del raw
    qf = gp.quantize_weight(w * (6 / 7), "nvfp4")
    b = qf.data.to_numpy()
    lo, hi = b & 0xF, b >> 4
    assert (E2M1_VALUES[lo[0, 0]], E2M1_VALUES[hi[0, 0]]) == (6.0, -6.0)  # k 0 low, k 1 high
    assert E2M1_VALUES[lo[1, 15]] < 0 < E2M1_VALUES[hi[1, 15]]  # k 30 low, k 31 high


def test_fp8_row_scales_of_quantize_fp8_are_accepted() -> None:
    """gp.quantize_fp8(w, granularity="row") gives (q, scale [N, 1]): a per-channel weight."""
    w = _weights("rows", 9, 64).astype(np.float32)
    q, s = gp.quantize_fp8(gp.from_numpy(w), granularity="row")
    qw = gp.QuantizedWeight("fp8", q, s)
    assert qw.block == 0 and qw.shape == (9, 64)
    np.testing.assert_array_equal(qw.dequantize(), as64(q.to_numpy()) * as64(s.to_numpy()))


def test_quantize_weight_rejects_bad_input() -> None:
    w = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match="format must be one of"):
        gp.quantize_weight(w, "int8")
    with pytest.raises(ValueError, match=r"w must be 2-D \[N, K\], got shape \(64,\)"):
        gp.quantize_weight(w[0], "fp8")
    with pytest.raises(ValueError, match=r"fp8 needs K .* % 16 == 0, got K=40"):
        gp.quantize_weight(np.ones((4, 40)), "fp8")
    with pytest.raises(ValueError, match=r"int4 needs K .* % 32 == 0, got K=48"):
        gp.quantize_weight(np.ones((4, 48)), "int4")
    with pytest.raises(TypeError, match="w must be a float array"):
        gp.quantize_weight(np.ones((4, 64), np.int32), "fp8")
    with pytest.raises(TypeError, match=r"GPUArray or numpy.ndarray"):
        gp.quantize_weight([[1.0] * 64], "fp8")
    bad = w.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        gp.quantize_weight(bad, "nvfp4")
    with pytest.raises(ValueError, match="scale_dtype applies to int4 only"):
        gp.quantize_weight(w, "fp8", scale_dtype="bfloat16")
    with pytest.raises(ValueError, match="int4 scale_dtype must be one of"):
        gp.quantize_weight(w, "int4", scale_dtype="float64")
    with pytest.raises(ValueError, match="fp8 block must be None/0 or 128"):
        gp.quantize_weight(w, "fp8", block=64)
    with pytest.raises(ValueError, match="int4 groups are 128"):
        gp.quantize_weight(w, "int4", block=64)
    with pytest.raises(ValueError, match=r"w8a8 block must be None/0 \(per-channel"):
        gp.quantize_weight(w, "w8a8", block=128)
    with pytest.raises(ValueError, match="beyond float16's range; use scale_dtype float32"):
        gp.quantize_weight(np.full((2, 64), 1e6), "int4", scale_dtype="float16")
    with pytest.raises(ValueError, match="beyond float32's range; scale w down"):
        gp.quantize_weight(np.full((2, 64), 1e40), "int4")
    for fmt, what in (("fp8", "fp8 scales"), ("w8a8", "w8a8 scales"), ("nvfp4", "global scale")):
        with pytest.raises(ValueError, match=f"{what} beyond float32's range"):
            gp.quantize_weight(np.full((2, 64), 1e42), fmt)


def test_quantized_weight_checks_its_arrays() -> None:
    qw = gp.quantize_weight(np.ones((4, 64), np.float32), "int4")
    with pytest.raises(ValueError, match="format must be one of"):
        gp.QuantizedWeight("int8", qw.data, qw.scales)
    with pytest.raises(TypeError, match="int4 data must be int4"):
        gp.QuantizedWeight("int4", gp.zeros((4, 64), "int8"), qw.scales)
    with pytest.raises(ValueError, match=r"int4 scales \(block 128\) must have shape \(4, 1\)"):
        gp.QuantizedWeight("int4", qw.data, gp.zeros((4, 2), "float32"))
    with pytest.raises(TypeError, match="int4 scales must be float32/bfloat16/float16"):
        gp.QuantizedWeight("int4", qw.data, gp.zeros((4, 1), "float64"))
    with pytest.raises(ValueError, match="global_scale applies to nvfp4 only"):
        gp.QuantizedWeight("int4", qw.data, qw.scales, global_scale=2.0)
    with pytest.raises(ValueError, match=r"int4 needs K .* multiple of 32, got K=16"):
        gp.QuantizedWeight("int4", gp.zeros((4, 16), "int4"), gp.zeros((4, 1), "float32"))
    wide = gp.zeros((4, 4), "float32")
    with pytest.raises(ValueError, match=r"scales .* must be contiguous"):
        gp.QuantizedWeight("int4", qw.data, wide[:, :1])
    q8 = gp.zeros((4, 64), "float8_e4m3fn")
    with pytest.raises(
        ValueError, match=r"fp8 scales \(block 0\) must have shape \(4,\) or \(4, 1\)"
    ):
        gp.QuantizedWeight("fp8", q8, gp.zeros((3,), "float32"))
    with pytest.raises(ValueError, match="fp8 block must be 0 or 128"):
        gp.QuantizedWeight("fp8", q8, gp.zeros((4,), "float32"), block=64)
    with pytest.raises(ValueError, match=r"w8a8 weight scales are per output channel"):
        gp.QuantizedWeight("w8a8", q8, gp.zeros((4, 1), "float32"), block=128)
    with pytest.raises(ValueError, match=r"w8a8 scales \(block 0\) must have shape \(4,\)"):
        gp.QuantizedWeight("w8a8", q8, gp.zeros((4, 2), "float32"))
    with pytest.raises(TypeError, match="w8a8 data must be float8_e4m3fn"):
        gp.QuantizedWeight("w8a8", gp.zeros((4, 64), "uint8"), gp.zeros((4,), "float32"))
    with pytest.raises(TypeError, match="nvfp4 scales must be float8_e4m3fn"):
        gp.QuantizedWeight("nvfp4", gp.zeros((4, 32), "uint8"), gp.zeros((4, 4), "float32"))
    f4 = gp.QuantizedWeight(
        "nvfp4", gp.zeros((4, 32), "uint8"), gp.zeros((4, 4), "float8_e4m3fn"), global_scale=0.1
    )
    assert f4.shape == (4, 64) and f4.global_scale == float(np.float32(0.1))
    assert "nvfp4" in repr(f4) and f4.nbytes == 4 * 32 + 4 * 4
