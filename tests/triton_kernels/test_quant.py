"""Triton quantize_fp8 / dequantize_fp8 against the NumPy backend (backends/cpu/quant.py).

Under TRITON_INTERPRET=1 the interpreter emulates fp32 -> fp8 (and -> bfloat16) conversion by
truncation, not the GPU's round-to-nearest-even (see test_copy.py), so there:
- scales are compared bit for bit (fp32 arithmetic the interpreter gets right);
- codes are compared bit for bit only on data built so that every quotient x / scale is an
  exact fp8 value (fp8 codes times a power-of-two scale per group), which no rounding changes;
  this checks grouping, indexing, the amax reduction and the per-tensor two-launch path;
- dequantize runs with float32 and float16 results (fp8 -> fp32 is exact there).
Random data (rounding, ties, saturation at the range's end, bfloat16 results) is compared bit
for bit on the GPU only (tests marked gpu).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import GPU, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels.quant import dequantize_fp8, quantize_fp8

FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
FMAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}

# (shape, group, scale shape): per tensor (the two-launch path, several partials), per row,
# 1x128 and 1x64 blocks, 128x128 and 2x32 blocks; odd sizes throughout.
GROUPS = [
    ((33, 1500), (33, 1500), (1,)),
    ((7, 300), (7, 300), (1,)),
    ((2, 5, 300), (1, 300), (2, 5, 1)),
    ((7, 300), (1, 128), (7, 3)),
    ((2, 3, 100), (1, 64), (2, 3, 2)),
    ((131, 260), (128, 128), (2, 3)),
    ((9, 70), (2, 32), (5, 3)),
]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _exact_data(rng: np.random.Generator, shape: tuple, group: tuple, dtype: str) -> np.ndarray:
    """fp8 codes times 2**e per group, each group holding +-fp8_max once: x / scale is exact."""
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    cols = shape[-1]
    br, bc = group
    codes = (rng.standard_normal((rows, cols)) * FMAX[dtype] / 8).astype(np.float32)
    codes = np.clip(codes, -FMAX[dtype], FMAX[dtype]).astype(FP8[dtype]).astype(np.float32)
    exps = rng.integers(-6, 7, size=(_cdiv(rows, br), _cdiv(cols, bc)))
    for gi in range(exps.shape[0]):
        for gj in range(exps.shape[1]):
            codes[gi * br, gj * bc] = FMAX[dtype] * (1 if (gi + gj) % 2 else -1)
    mult = np.repeat(np.repeat(2.0**exps, br, 0), bc, 1)[:rows, :cols]
    return (codes * mult).astype(np.float32).reshape(shape)


def _ref(x: np.ndarray, dtype: str, group: tuple, sshape: tuple) -> tuple:
    return cpu.quantize_fp8(x, dtype=dtype, group=group, scale_shape=sshape)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(("shape", "group", "sshape"), GROUPS, ids=str)
def test_quantize_exact_codes(device: str, dtype: str, shape: tuple, group: tuple, sshape: tuple):
    rng = np.random.default_rng(len(shape) * 7 + group[1])
    x = _exact_data(rng, shape, group, dtype)
    q, s = quantize_fp8(up(x, device), dtype=dtype, group=group, scale_shape=sshape)
    rq, rs = _ref(x, dtype, group, sshape)
    assert q.dtype.name == dtype and q.shape == x.shape and s.shape == sshape
    np.testing.assert_array_equal(s.to_numpy(), rs)
    np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
    # The scales are the powers of two the data was built with.
    assert np.all(np.log2(rs) == np.round(np.log2(rs)))


@pytest.mark.parametrize(("shape", "group", "sshape"), GROUPS, ids=str)
def test_quantize_scales_random(device: str, shape: tuple, group: tuple, sshape: tuple) -> None:
    rng = np.random.default_rng(group[0] + 3 * group[1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1, shape[-1])[:, :5] = 0.0
    _q, s = quantize_fp8(up(x, device), dtype="float8_e4m3fn", group=group, scale_shape=sshape)
    _, rs = _ref(x, "float8_e4m3fn", group, sshape)
    np.testing.assert_array_equal(s.to_numpy(), rs)  # codes: test_quantize_bit_exact_gpu


def test_quantize_strided_and_transposed_input(device: str) -> None:
    rng = np.random.default_rng(5)
    for group in ((1, 66), (40, 66)):
        base = _exact_data(rng, (40, 66), group, "float8_e4m3fn")
        wide = np.zeros((40, 132), np.float32)
        wide[:, ::2] = base
        sshape = (40, 1) if group[0] == 1 else (1,)
        for v in (up(wide, device)[:, ::2], up(base.T.copy(), device).T):
            q, s = quantize_fp8(v, dtype="float8_e4m3fn", group=group, scale_shape=sshape)
            rq, rs = _ref(base, "float8_e4m3fn", group, sshape)
            np.testing.assert_array_equal(s.to_numpy(), rs)
            np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
    # Leading dims that do not merge (every other middle row): copied, then quantized per row.
    base = _exact_data(rng, (4, 20, 66), (1, 66), "float8_e4m3fn")
    host = base[:, ::2]
    q, s = quantize_fp8(
        up(base, device)[:, ::2], dtype="float8_e4m3fn", group=(1, 66), scale_shape=(4, 10, 1)
    )
    rq, rs = _ref(host, "float8_e4m3fn", (1, 66), (4, 10, 1))
    np.testing.assert_array_equal(s.to_numpy(), rs)
    np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))


@GPU
@pytest.mark.parametrize("src", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(("shape", "group", "sshape"), GROUPS, ids=str)
def test_quantize_bit_exact_gpu(
    device: str, src: str, dtype: str, shape: tuple, group: tuple, sshape: tuple
) -> None:
    rng = np.random.default_rng(len(src) + 11 * group[1])
    scale = rng.choice([1e-4, 1.0, 300.0])
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    x.reshape(-1, shape[-1])[:, 1:4] = 0.0
    x = x.astype(NP[src])
    q, s = quantize_fp8(up(x, device), dtype=dtype, group=group, scale_shape=sshape)
    rq, rs = _ref(x, dtype, group, sshape)
    np.testing.assert_array_equal(s.to_numpy(), rs)
    np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))


@GPU
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_ties_and_range_end_gpu(device: str, dtype: str) -> None:
    """Quotients exactly halfway between fp8 values round to even; the largest element lands on
    fp8_max even when amax / fp8_max rounds down (the clamp)."""
    fmax = np.float32(FMAX[dtype])
    grid = np.array([v for v in range(256)], np.uint8).view(FP8[dtype]).astype(np.float32)
    grid = np.unique(grid[np.isfinite(grid) & (grid >= 0) & (grid <= fmax)])
    mids = ((grid[:-1] + grid[1:]) / 2).astype(np.float32)  # exact in fp32: ties
    x = np.concatenate([mids, -mids, [fmax, 1.2345678 * fmax]]).astype(np.float32)[None, :]
    for amax in (fmax, np.float32(1.2345678) * fmax):
        xs = x.copy()
        xs[0, -1] = amax
        xs[0, -2] = 0
        q, s = quantize_fp8(up(xs, device), dtype=dtype, group=(1, xs.shape[1]), scale_shape=(1,))
        rq, rs = _ref(xs, dtype, (1, xs.shape[1]), (1,))
        np.testing.assert_array_equal(s.to_numpy(), rs)
        np.testing.assert_array_equal(_bits(q.to_numpy()), _bits(rq))
        assert q.to_numpy().astype(np.float32)[0, -1] == fmax


def _dq_out_dtypes() -> list:
    return ["float32", "float16", pytest.param("bfloat16", marks=GPU)]


@pytest.mark.parametrize("out_dtype", _dq_out_dtypes())
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(("shape", "group", "sshape"), GROUPS, ids=str)
def test_dequantize(
    device: str, out_dtype: str, dtype: str, shape: tuple, group: tuple, sshape: tuple
) -> None:
    rng = np.random.default_rng(group[1] + len(out_dtype))
    q = (rng.standard_normal(shape) * 20).astype(np.float32).astype(FP8[dtype])
    s = (rng.random(sshape) * 4 + 0.01).astype(np.float32)
    want = cpu.dequantize_fp8(q, s, out_dtype=NP[out_dtype], group=group)
    out = poisoned(shape, out_dtype, device)
    r = dequantize_fp8(up(q, device), up(s, device), out_dtype=out_dtype, group=group, out=out)
    assert r is out
    np.testing.assert_array_equal(r.to_numpy(), want)
    r = dequantize_fp8(up(q, device), up(s, device), out_dtype=out_dtype, group=group)
    assert r.is_contiguous()
    np.testing.assert_array_equal(r.to_numpy(), want)


def test_dequantize_strided_operands(device: str) -> None:
    rng = np.random.default_rng(9)
    q = (rng.standard_normal((12, 200)) * 20).astype(np.float32).astype(FP8["float8_e4m3fn"])
    s = (rng.random((12, 2)) + 0.5).astype(np.float32)
    want = cpu.dequantize_fp8(q, s, out_dtype=np.float32, group=(1, 128))
    qt = up(q.T.copy(), device).T
    st = up(s.T.copy(), device).T
    out = poisoned_strided((12, 200), "float32", device)
    r = dequantize_fp8(qt, st, out_dtype="float32", group=(1, 128), out=out)
    assert r is out
    np.testing.assert_array_equal(r.to_numpy(), want)


def test_routed_ops_use_the_kernels(device: str) -> None:
    """gp.quantize_fp8 / gp.dequantize_fp8 reach these kernels (forced under the interpreter)."""
    rng = np.random.default_rng(4)
    x = _exact_data(rng, (6, 256), (1, 128), "float8_e4m3fn")
    with gp.route(quantize_fp8="triton", dequantize_fp8="triton"):
        before = gp.routing.stats().get("quantize_fp8", {}).get("triton", 0)
        q, s = gp.quantize_fp8(up(x, device), granularity="block", block=128)
        d = gp.dequantize_fp8(q, s, out_dtype="float32", block=128)
        assert gp.routing.stats()["quantize_fp8"]["triton"] == before + 1
    np.testing.assert_array_equal(d.to_numpy(), x)  # exact data round-trips exactly
