"""The Triton mixed-input GEMM (backends/triton_kernels/qgemm.py): x @ dequant(W)^T + bias for
fp8 (per-channel and 128-block scales), int4 (128-group scales in three dtypes) and nvfp4
weights against the float64 product with the dequantized weight, at row counts on both sides of
a tile, K with a partial group, strided x, bias, and out as a column slice; and the
deterministic mode's batch invariance."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _tkutil import GPU, poisoned, up

import pygpukit as gp
from pygpukit.backends.triton_kernels import qgemm

# float16 runs under the interpreter too (NumPy has it); bfloat16 on the GPU only.
HALF = ["float16", pytest.param("bfloat16", marks=GPU)]
# (format, block / scale dtype) of every weight layout the kernel reads
LAYOUTS = [
    ("fp8", 0),
    ("fp8", 128),
    ("int4", "float32"),
    ("int4", "bfloat16"),
    ("int4", "float16"),
    ("nvfp4", None),
]


def _weight(
    fmt: str, opt: object, n: int, k: int, device: str, seed: int = 0
) -> gp.QuantizedWeight:
    w = np.random.default_rng(seed).standard_normal((n, k)) * 0.5
    if fmt == "fp8":
        return gp.quantize_weight(w, "fp8", block=int(opt), device=device)  # type: ignore[call-overload]
    if fmt == "int4":
        return gp.quantize_weight(w, "int4", scale_dtype=opt, device=device)
    return gp.quantize_weight(w, "nvfp4", device=device)


def _call(x: gp.GPUArray, qw: gp.QuantizedWeight, bias: gp.GPUArray | None = None,
          out: gp.GPUArray | None = None) -> gp.GPUArray:  # fmt: skip
    fn = getattr(qgemm, f"qgemm_{qw.format}")
    kw = {"fp8": {"block": qw.block}, "int4": {"group": qw.block}}.get(
        qw.format, {"global_scale": qw.global_scale}
    )
    return fn(x, qw.data, qw.scales, bias, out=out, **kw)  # type: ignore[no-any-return]


def _want(x: np.ndarray, qw: gp.QuantizedWeight, bias: np.ndarray | None) -> np.ndarray:
    y = x.astype(np.float64) @ qw.dequantize().astype(np.float64).T
    return y if bias is None else y + bias.astype(np.float64)


@pytest.mark.parametrize(("fmt", "opt"), LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("m", [1, 19, 70])
def test_product_against_float64(device: str, fmt: str, opt: object, dtype: str, m: int) -> None:
    """K = 160: a partial 128-group (int4, fp8 blocks) and a partial K tile; N = 72: a partial
    weight tile."""
    n, k = 72, 160
    qw = _weight(fmt, opt, n, k, device, seed=m)
    x = up(np.random.default_rng(m + 1).standard_normal((m, k)), device).astype(dtype)
    y = _call(x, qw)
    assert y.shape == (m, n) and y.dtype.name == dtype
    assert_close(y, _want(x.astype("float32").to_numpy(), qw, None), dtype)


@pytest.mark.parametrize(("fmt", "opt"), [("fp8", 128), ("int4", "float32"), ("nvfp4", None)])
@pytest.mark.parametrize("dtype", HALF)
def test_strided_x_bias_and_out_slice(device: str, fmt: str, opt: object, dtype: str) -> None:
    """x every other row of a wider array and [2, 9, K] leading dims, a strided bias, out a
    column slice of a poisoned wider array (the columns around it untouched)."""
    n, k = 40, 96
    qw = _weight(fmt, opt, n, k, device, seed=3)
    rng = np.random.default_rng(4)
    wide = up(rng.standard_normal((2, 18, k)), device).astype(dtype)
    x = wide[:, ::2]
    bias = up(rng.standard_normal(2 * n), device).astype(dtype)[::2]  # strided too
    big = poisoned((2, 9, n + 8), dtype, device)
    before = big.to_numpy().copy()
    out = big[..., 4 : 4 + n]
    y = _call(x, qw, bias, out=out)
    assert y is out
    want = _want(x.astype("float32").to_numpy(), qw, bias.astype("float32").to_numpy())
    assert_close(out, want, dtype)
    after = big.to_numpy().view(np.uint16)
    before = before.view(np.uint16)
    np.testing.assert_array_equal(after[..., :4], before[..., :4])
    np.testing.assert_array_equal(after[..., 4 + n :], before[..., 4 + n :])


@pytest.mark.parametrize(("fmt", "opt"), LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("m", [1, 19])
def test_gated_product_against_float64(device: str, fmt: str, opt: object, dtype: str,
                                       m: int) -> None:  # fmt: skip
    """gemv_<format>_silu_mul: W [2I, K] = gate rows then up rows, y = silu(g) * u of the two
    float32 sums (their scales applied), one rounding. I = 69: a partial weight tile (its
    padding columns read no up row and are not stored); K = 160: partial group and K tile.
    An odd number of rows is refused."""
    i, k = 69, 160
    qw = _weight(fmt, opt, 2 * i, k, device, seed=11 + m)
    x = up(np.random.default_rng(m + 2).standard_normal((m, k)), device).astype(dtype)
    kw = {"fp8": {"block": qw.block}, "int4": {"group": qw.block}}.get(
        qw.format, {"global_scale": qw.global_scale}
    )
    out = poisoned((m, i), dtype, device)
    y = getattr(qgemm, f"gemv_{fmt}_silu_mul")(x, qw.data, qw.scales, out=out, **kw)
    assert y is out and y.shape == (m, i)
    h = _want(x.astype("float32").to_numpy(), qw, None)
    g = h[:, :i]
    assert_close(y, g / (1.0 + np.exp(-g)) * h[:, i:], dtype)
    odd = _weight(fmt, opt, 2 * i - 1, k, device)
    with pytest.raises(ValueError, match="a gated product needs an even number of weight rows"):
        getattr(qgemm, f"gemv_{fmt}_silu_mul")(x, odd.data, odd.scales, **kw)


@GPU
@pytest.mark.parametrize(("fmt", "opt"), [("fp8", 128), ("int4", "float32"), ("nvfp4", None)])
def test_deterministic_mode_is_batch_invariant(device: str, fmt: str, opt: object) -> None:
    """Under the deterministic mode a row's bits do not depend on how many rows come with it."""
    n, k = 256, 512
    qw = _weight(fmt, opt, n, k, device, seed=7)
    x = up(np.random.default_rng(8).standard_normal((77, k)), device).astype("bfloat16")
    with gp.deterministic():
        whole = _call(x, qw).to_numpy()
        for a, b in ((5, 6), (0, 1), (40, 77)):
            part = _call(x[a:b], qw).to_numpy().view(np.uint16)
            np.testing.assert_array_equal(part, whole[a:b].view(np.uint16))


def test_empty_rows(device: str) -> None:
    qw = _weight("int4", "float32", 16, 64, device)
    y = _call(up(np.zeros((0, 64)), device).astype("float16"), qw)
    assert y.shape == (0, 16)


@pytest.mark.parametrize(("fmt", "opt"), LAYOUTS)
@pytest.mark.parametrize("dtype", HALF)
def test_dequantize_weight(device: str, fmt: str, opt: object, dtype: str) -> None:
    """Every value its code times its scales, rounded to dtype: within one rounding of the
    float64 values (fp8 per-channel and int4 ones are exact products in float32)."""
    qw = _weight(fmt, opt, 70, 160, device, seed=9)
    got = qgemm.dequantize_weight(
        qw.data, qw.scales, fmt=fmt, block=qw.block, global_scale=qw.global_scale,
        out_dtype=dtype,
    )  # fmt: skip
    assert got.shape == (70, 160) and got.dtype.name == dtype
    want = qw.dequantize()
    g = got.astype("float32").to_numpy().astype(np.float64)
    ulp = 2.0**-8 if dtype == "bfloat16" else 2.0**-11
    assert (np.abs(g - want) <= ulp * np.abs(want) + 2.0**-24).all()  # fp16 subnormals


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("m", [1, 33])
def test_w8a8_codes_and_row_scales(device: str, dtype: str, m: int) -> None:
    """qgemm_w8a8: (row scales . e4m3 codes of x) @ (channel scales . codes)^T + bias."""
    n, k = 40, 96
    qw = _weight("fp8", 0, n, k, device, seed=11)
    rng = np.random.default_rng(12)
    x = up(rng.standard_normal((m, k)), device).astype("float32")
    q, sa = gp.quantize_fp8(x, granularity="row")
    bias = up(rng.standard_normal(n), device).astype(dtype)
    y = qgemm.qgemm_w8a8(q, sa, qw.data, qw.scales, bias, out_dtype=dtype)
    assert y.shape == (m, n) and y.dtype.name == dtype
    a = q.astype("float32").to_numpy().astype(np.float64) * sa.to_numpy().astype(np.float64)
    want = a @ qw.dequantize().T + bias.astype("float32").to_numpy()
    assert_close(y, want, dtype)
