"""Weights quantized by the Triton kernels (backends/triton_kernels/qweight.py) against the NumPy
reference quantizers (backends/cpu/gemv.py), bit for bit: every format and scale layout, on
random weights with rows of very different magnitudes, on weights built of the ties of each
rounding (e4m3 and e2m1 codes, int4 values, e4m3 block scales, bfloat16 / float16 int4 scales),
signed zeros, zero rows and groups, a partial last group, and a row-strided view. Then, on a
GPU, gp.quantize_weight through its routed ops against the host reference."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("triton")

from _data import seed
from _tkutil import GPU

import pygpukit as gp
from pygpukit.backends.cpu import qweight as ref
from pygpukit.backends.cpu.gemv import nvfp4_global_scale
from pygpukit.backends.triton_kernels import qweight as tq
from pygpukit.dtypes import as_dtype

# (format, block, scale dtype) of every layout gp.quantize_weight makes
LAYOUTS = [
    ("fp8", 0, "float32"),
    ("fp8", 128, "float32"),
    ("int4", 128, "float32"),
    ("int4", 128, "bfloat16"),
    ("int4", 128, "float16"),
    ("nvfp4", 16, "float32"),
]
# every input dtype, under the interpreter too (bfloat16 travels as its bits)
INPUTS = ["float32", "float16", "bfloat16", "float64"]


def _bits(a: Any) -> np.ndarray:
    """An array's values as comparable integers (int4 as int8, 1-byte floats as uint8)."""
    a = np.asarray(a)
    if a.dtype == ml_dtypes.int4:
        return a.astype(np.int8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _random(tag: str, n: int, k: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(seed("tqw", tag, n, k, dtype))
    w = rng.standard_normal((n, k)) * np.exp(rng.uniform(-4, 4, (n, 1)))
    w[1] = 0.0  # a zero row
    w[2, 128:256] = 0.0  # a zero group
    w[3, :4] = [-0.0, -1e-30, 1e-30, 0.0]  # signed zeros and values that round to them
    return w.astype(as_dtype(dtype).np_dtype)


def _ties(fmt: str) -> np.ndarray:
    """Rows whose every quotient w / scale lies on a tie of the format's rounding (or on a
    code), with each row's or block's maximum set so that its scale is exactly 1.

    fp8: amax 448 (scale 1), then every midpoint between e4m3 neighbours of each binade and of
    the subnormals; int4: amax 7, the halves k + 1/2 (|k + 1/2| < 7); nvfp4: global amax 2688
    (g = 1), blocks of amax 6 (scale 1) holding the e2m1 midpoints, and blocks whose amax / 6 is
    an e4m3 midpoint (the block scale's own rounding). Negated copies and -0 too."""
    if fmt == "fp8":
        mids = [(m + 0.5) * 2.0**-9 for m in range(8)]
        mids += [(8 + m + 0.5) * 2.0 ** (e - 3) for e in range(-6, 8) for m in range(8)]
        vals = np.array([448.0, *mids, *(-v for v in mids), -0.0])
        k = -(-len(vals) // 128) * 128
        return np.resize(vals, (4, k))  # each 128-block holds 448 where it starts a row
    if fmt == "int4":
        vals = np.array([7.0, *(k + 0.5 for k in range(-7, 7)), -0.0, 3.0, -7.0])
        return np.resize(np.concatenate([vals, np.zeros(128 - len(vals))]), (3, 256))
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    block = [6.0, *mids, *(-v for v in mids), -0.0]
    e4m3_mids = [6.0 * (8 + m + 0.5) * 2.0 ** (e - 3) / 8 for e in range(-2, 3) for m in range(8)]
    rows = [block * 8 for _ in range(2)]
    rows[0][0] = 2688.0  # the global maximum: g = 2688 / (6 * 448) = 1
    scale_row = []
    for a in e4m3_mids[:8]:
        scale_row += [a, a / 3, -a / 7] + [a / 2] * 13
    rows.append(scale_row)
    return np.array(rows)


def _check(w: np.ndarray, fmt: str, block: int, sdt: str, device: str, view: bool = False) -> None:
    dev_w = gp.from_numpy(w, device=device)
    if view:  # every other row of a twice-as-tall buffer
        tall = np.zeros((2 * w.shape[0], w.shape[1]), w.dtype)
        tall[::2] = w
        dev_w = gp.from_numpy(tall, device=device)[::2]
    amax = tq.weight_amax(dev_w)
    want_amax = ref.weight_amax(w)
    np.testing.assert_array_equal(_bits(amax.to_numpy()), _bits(want_amax))
    g = nvfp4_global_scale(float(want_amax.max(initial=0.0))) if fmt == "nvfp4" else 1.0
    params = {"format": fmt, "block": block, "scale_dtype": sdt, "global_scale": g}
    data, scales = tq.quantize_weight(dev_w, amax, **params)  # type: ignore[arg-type]
    want_data, want_scales = ref.quantize_weight(w, want_amax, **params)  # type: ignore[arg-type]
    np.testing.assert_array_equal(_bits(scales.to_numpy()), _bits(want_scales))
    np.testing.assert_array_equal(_bits(data.to_numpy()), _bits(want_data))


@pytest.mark.parametrize("dtype", INPUTS)
@pytest.mark.parametrize(("fmt", "block", "sdt"), LAYOUTS)
@pytest.mark.parametrize("nk", [(35, 544), (16, 4128)], ids=str)
def test_random_weights_match_the_reference(
    fmt: str, block: int, sdt: str, dtype: str, nk: tuple[int, int], device: str
) -> None:
    """K 544 and 4128: a partial last group of 128 (and of the 256-value tile); 35 rows: a
    partial last tile of 16 rows."""
    _check(_random(fmt, *nk, dtype), fmt, block, sdt, device)


@pytest.mark.parametrize(("fmt", "block", "sdt"), LAYOUTS)
def test_ties_round_to_even(fmt: str, block: int, sdt: str, device: str) -> None:
    w = _ties(fmt)
    want, _ = ref.quantize_weight(w, ref.weight_amax(w), format=fmt, block=block,
                                  scale_dtype=sdt, global_scale=1.0)  # fmt: skip
    # the ties are there: some quotient rounds down to an even code, not up
    assert len(np.unique(_bits(want))) > 4
    _check(w.astype(np.float32), fmt, block, sdt, device)


@pytest.mark.parametrize("sdt", ["bfloat16", "float16"])
def test_int4_half_scales_round_ties_to_even(sdt: str, device: str) -> None:
    """Groups whose amax / 7 lies halfway between two bfloat16 / float16 scales, and a group
    whose float16 scale is subnormal."""
    p = 7 if sdt == "bfloat16" else 10
    amax = [7.0 * (1 + 2.0 ** -(p + 1)), 7.0 * (1 + 3 * 2.0 ** -(p + 1)), 7.0 * 2.0**-20]
    w = np.zeros((3, 128), np.float32)
    for i, a in enumerate(amax):
        w[i, 0], w[i, 1:] = a, np.linspace(-a, a, 127)
    _check(w, "int4", 128, sdt, device)


@pytest.mark.parametrize(
    ("fmt", "sdt", "grid"),
    [
        ("int4", "float16", 2.0**-24),  # float16's subnormal step
        ("int4", "bfloat16", 2.0**-133),  # bfloat16's
        ("nvfp4", "float32", 2.0**-9),  # e4m3's (the block scale; g = 1)
    ],
)
def test_subnormal_scales_round_ties_to_even(fmt: str, sdt: str, grid: float, device: str) -> None:
    """Groups whose scale (amax / 7; nvfp4: amax / 6) lies halfway between two subnormals of
    the scale's type, below an odd (rounds up) and an even (rounds down) step: rounded down, the
    group's amax over its scale passes 7, which int4 clips."""
    div, g = (7.0, 128) if fmt == "int4" else (6.0, 16)
    rows = []
    for m in (5, 6, 1, 2):
        a = div * (m + 0.5) * grid
        rows.append(np.concatenate([[a, -a], np.linspace(-a, a, g - 2)] * (128 // g)))
    if fmt == "nvfp4":
        rows.append(np.full(128, 2688.0))  # the global maximum: g = 2688 / (6 * 448) = 1
    _check(np.array(rows, np.float32), fmt, 128 if fmt == "int4" else 16, sdt, device)


def test_fp8_scale_underflow_gives_code_zero(device: str) -> None:
    """A row whose amax / 448 underflows float32 (float64 input): scale 0, codes 0, and the
    dequantized row 0 (not NaN)."""
    w = np.ones((2, 64))
    w[1] = np.linspace(-1e-300, 1e-300, 64)
    _check(w, "fp8", 0, "float32", device)
    codes, scales = ref.quantize_weight(w, ref.weight_amax(w), format="fp8", block=0,
                                        scale_dtype="float32", global_scale=1.0)  # fmt: skip
    assert scales[1] == 0 and not _bits(codes)[1].any()


def test_bfloat16_subnormal_inputs(device: str) -> None:
    w = np.linspace(-1.01e-39, 2e-39, 5 * 128).reshape(5, 128).astype(ml_dtypes.bfloat16)
    w[0, 0] = 3.0
    for fmt, block, sdt in LAYOUTS:
        _check(w, fmt, block, sdt, device)


def test_global_scale_must_be_a_float32_value(device: str) -> None:
    w = gp.from_numpy(np.ones((2, 32), np.float32), device=device)
    with pytest.raises(ValueError, match="global_scale must be a float32 value"):
        tq.quantize_weight(w, tq.weight_amax(w), format="nvfp4", block=16,
                           scale_dtype="float32", global_scale=0.1)  # fmt: skip


@pytest.mark.parametrize(("fmt", "block", "sdt"), LAYOUTS)
def test_row_strided_view(fmt: str, block: int, sdt: str, device: str) -> None:
    _check(_random(fmt, 9, 288, "float32"), fmt, block, sdt, device, view=True)


def test_amax_propagates_nan_and_inf(device: str) -> None:
    w = np.ones((3, 300), np.float32)
    w[0, 299] = np.nan
    w[2, 7] = -np.inf
    a = tq.weight_amax(gp.from_numpy(w, device=device)).to_numpy()
    assert np.isnan(a[0]) and a[1] == 1.0 and a[2] == np.inf


# ----- gp.quantize_weight on the GPU: the routed ops, the same bits as the host reference ------


@GPU
@pytest.mark.parametrize(("fmt", "block", "sdt"), [*LAYOUTS, ("w8a8", 0, "float32")])
@pytest.mark.parametrize("source", ["numpy bfloat16", "numpy float64", "gpu float16 rows"])
def test_quantize_weight_on_the_gpu_is_the_host_reference(
    fmt: str, block: int, sdt: str, source: str
) -> None:
    dtype = source.split()[1]
    w = _random(fmt, 33, 416, dtype)
    kw: dict[str, Any] = {"scale_dtype": sdt} if fmt == "int4" else {}
    if fmt == "fp8":
        kw["block"] = block
    host = gp.quantize_weight(w, fmt, device="cpu", **kw)
    src: Any = w
    if source.startswith("gpu"):
        tall = np.zeros((66, 416), w.dtype)
        tall[::2] = w
        src = gp.from_numpy(tall, device="cuda:0")[::2]
    gp.routing.reset_stats()
    qw = gp.quantize_weight(src, fmt, device="cuda:0", **kw)
    assert gp.routing.stats()["quantize_weight"] == {"triton": 1}
    assert qw.device == gp.device("cuda:0") and qw.global_scale == host.global_scale
    np.testing.assert_array_equal(_bits(qw.data.to_numpy()), _bits(host.data.to_numpy()))
    np.testing.assert_array_equal(_bits(qw.scales.to_numpy()), _bits(host.scales.to_numpy()))


@GPU
def test_quantize_weight_on_the_gpu_checks_first() -> None:
    bad = np.ones((4, 64), np.float32)
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        gp.quantize_weight(bad, "fp8", device="cuda:0")
    with pytest.raises(ValueError, match="beyond float16's range"):
        gp.quantize_weight(np.full((2, 64), 1e6), "int4", scale_dtype="float16", device="cuda:0")
    tiny = np.full((2, 64), 1e-300)  # nvfp4's float32 global scale underflows: 1
    qw = gp.quantize_weight(tiny, "nvfp4", device="cuda:0")
    assert qw.global_scale == 1.0
    assert (qw.dequantize() == 0).all()
    ok = gp.quantize_weight(np.full((4, 64), 7.0, np.float32), "int4", device="cuda:0")
    assert (ok.dequantize() == 7).all()  # scale 1: the runtime is usable after the refusals
