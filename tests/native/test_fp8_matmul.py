"""gp.matmul_fp8 on cuBLASLt (H100/H200), against the float64 product of the dequantized
operands.

Error bounds (assert_close's rtol: relative norm and every element within rtol * (|ref| +
max |ref|)); the fp8 operands and scales are exact inputs, so only the product's own error
counts:
- float32 result: 2e-3. Hopper's FP8 tensor-core MMA keeps a reduced-precision accumulator
  (about 14 mantissa bits, DeepSeek-V3 report section 3.3.2); cuBLASLt promotes it into fp32
  every few MMAs, so errors of ~2^-14 per promotion interval remain, far above fp32 rounding.
- bfloat16 result: 1e-2 (docs/design.md's bf16 bound; the final rounding dominates).
- float16 result: 3e-3 (fp16's 2e-3 plus the accumulator's share).
- fast_accum (no promotion): 1e-2 for every result dtype.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import seed

import pygpukit as gp
from pygpukit import _core, routing

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
RTOL = {"float32": 2e-3, "bfloat16": 1e-2, "float16": 3e-3}
FAST_RTOL = 1e-2


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device=DEV)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _fp8(rng: np.random.Generator, shape: tuple, t: str) -> np.ndarray:
    return (rng.standard_normal(shape) * 4).astype(np.float32).astype(FP8[t])


SCALE_SHAPES = {
    "tensor": lambda rows, k: (1,),
    "row": lambda rows, k: (rows, 1),
    "block1x128": lambda rows, k: (rows, _cdiv(k, 128)),
    "block128x128": lambda rows, k: (_cdiv(rows, 128), _cdiv(k, 128)),
}


def _expand(s: np.ndarray, kind: str, rows: int, k: int) -> np.ndarray:
    s = s.astype(np.float64)
    if kind == "tensor":
        return np.full((rows, k), s.reshape(-1)[0])
    if kind == "row":
        return np.repeat(s.reshape(rows, 1), k, 1)
    br = 1 if kind == "block1x128" else 128
    return np.repeat(np.repeat(s, br, 0), 128, 1)[:rows, :k]


def _case(
    m: int, n: int, k: int, kinds: tuple[str, str], types: tuple[str, str], tag: Any
) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed("fp8mm", m, n, k, kinds, types, tag))
    a, b = _fp8(rng, (m, k), types[0]), _fp8(rng, (n, k), types[1])
    sa = (rng.random(SCALE_SHAPES[kinds[0]](m, k)) + 0.1).astype(np.float32)
    sb = (rng.random(SCALE_SHAPES[kinds[1]](n, k)) + 0.1).astype(np.float32)
    ref = (a.astype(np.float64) * _expand(sa, kinds[0], m, k)) @ (
        b.astype(np.float64) * _expand(sb, kinds[1], n, k)
    ).T
    return a, b, sa, sb, ref


KINDS = [
    ("tensor", "tensor"),
    ("row", "row"),
    ("tensor", "row"),
    ("row", "tensor"),
    ("block1x128", "block128x128"),
    ("block1x128", "block1x128"),
    ("tensor", "block128x128"),
    ("row", "block1x128"),
    ("block1x128", "tensor"),
]
SHAPES = [(128, 256, 512), (7, 33, 272), (1, 4096, 1024), (129, 257, 384), (64, 48, 16)]


@pytest.mark.parametrize("kinds", KINDS, ids="-".join)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize(
    "types", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2")], ids="x".join
)
def test_matmul_fp8_modes(kinds: tuple[str, str], shape: tuple, types: tuple[str, str]) -> None:
    m, n, k = shape
    a, b, sa, sb, ref = _case(m, n, k, kinds, types, 0)
    out = gp.full((m, n), float("nan"), dtype="bfloat16", device=DEV)
    r = gp.matmul_fp8(up(a), up(b), scale_a=up(sa), scale_b=up(sb), out=out)
    assert r is out
    assert_close(r, ref, "bfloat16", rtol=RTOL["bfloat16"])


@pytest.mark.parametrize("out_dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("row", "row"), KINDS[4]], ids="-".join)
def test_matmul_fp8_result_dtypes_and_bias(out_dtype: str, kinds: tuple[str, str]) -> None:
    m, n, k = 100, 272, 640
    a, b, sa, sb, ref = _case(m, n, k, kinds, ("e4m3", "e4m3"), out_dtype)
    bias = (np.random.default_rng(1).standard_normal(n) * 10).astype(NP[out_dtype])
    for with_bias in (False, True):
        want = ref + bias.astype(np.float64) if with_bias else ref
        r = gp.matmul_fp8(
            up(a), up(b), scale_a=up(sa), scale_b=up(sb), out_dtype=out_dtype,
            bias=up(bias) if with_bias else None,
        )  # fmt: skip
        assert r.dtype.name == out_dtype and r.shape == (m, n)
        assert_close(r, want, out_dtype, rtol=RTOL[out_dtype], name=f"bias={with_bias}")


@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("row", "row")], ids="-".join)
def test_matmul_fp8_fast_accum(kinds: tuple[str, str]) -> None:
    a, b, sa, sb, ref = _case(256, 512, 4096, kinds, ("e4m3", "e4m3"), "fast")
    r = gp.matmul_fp8(
        up(a), up(b), scale_a=up(sa), scale_b=up(sb), out_dtype="float32", fast_accum=True
    )
    assert_close(r, ref, "float32", rtol=FAST_RTOL)


def test_matmul_fp8_layouts_outs_and_scales() -> None:
    """Strided operands (read in place), misaligned ones (copied), transposed/strided scales,
    a non-contiguous out, a 16-byte-unaligned out, and scale values in every layout."""
    m, n, k = 33, 80, 256
    a, b, sa, sb, ref = _case(m, n, k, ("block1x128", "block128x128"), ("e4m3", "e4m3"), "lay")
    a_wide = np.zeros((m, 2 * k), a.dtype)
    a_wide[:, :k] = a
    b_off = np.zeros(n * k + 16, b.dtype)
    b_off[1 : 1 + n * k] = b.reshape(-1)
    a_view = up(a_wide)[:, :k]  # row stride 2K: read in place
    b_view = up(b_off)[1 : 1 + n * k].reshape(n, k)  # 1 byte off alignment: copied
    sa_t = up(sa.T.copy()).T  # scales in cuBLASLt's own (outer-dim-major) order
    sb_wide = np.zeros((sb.shape[0], 2 * sb.shape[1]), np.float32)
    sb_wide[:, ::2] = sb
    sb_view = up(sb_wide)[:, ::2]
    wide = gp.full((m, 2 * n), float("nan"), dtype="float32", device=DEV)
    out = wide[:, ::2]
    r = gp.matmul_fp8(a_view, b_view, scale_a=sa_t, scale_b=sb_view, out_dtype="float32", out=out)
    assert r is out
    assert_close(r, ref, "float32", rtol=RTOL["float32"])
    flat = gp.full((m * n + 1,), float("nan"), dtype="float32", device=DEV)
    out2 = flat[1:].reshape(m, n)  # contiguous, 4 bytes past a 16-byte boundary
    r = gp.matmul_fp8(up(a), up(b), scale_a=up(sa), scale_b=up(sb), out_dtype="float32", out=out2)
    assert r is out2
    assert_close(r, ref, "float32", rtol=RTOL["float32"])


def test_matmul_fp8_plans_are_cached_and_routed_natively() -> None:
    a, b, sa, sb, _ = _case(32, 64, 128, ("row", "row"), ("e4m3", "e4m3"), "plan")
    args = (up(a), up(b))
    kw = dict(scale_a=up(sa), scale_b=up(sb))
    gp.matmul_fp8(*args, **kw)
    n_plans = _core.cublaslt_plan_count()
    for _ in range(3):
        gp.matmul_fp8(*args, **kw)
    assert _core.cublaslt_plan_count() == n_plans
    ex = routing.explain("matmul_fp8", *args, kw["scale_a"], kw["scale_b"])
    assert ex.backend == "native", str(ex)


def test_matmul_fp8_device_mismatch_is_an_error_before_work() -> None:
    a, b, sa, sb, _ = _case(16, 32, 64, ("tensor", "tensor"), ("e4m3", "e4m3"), "dev")
    with pytest.raises(ValueError, match="different devices"):
        gp.matmul_fp8(up(a), gp.from_numpy(b, device="cpu"), scale_a=up(sa), scale_b=up(sb))


def test_matmul_fp8_quantized_linear_end_to_end() -> None:
    """quantize_fp8 (Triton) feeding matmul_fp8: per-row activations x per-row weights and
    1x128 activations x 128x128 weights, against the float64 product of the dequantized
    quantized operands."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 512)).astype(np.float32)
    w = (rng.standard_normal((384, 512)) * 0.05).astype(np.float32)
    for ga, gb, blk_b in (("row", "row", 128), ("block", "block", (128, 128))):
        qx, sx = gp.quantize_fp8(up(x).astype("bfloat16"), granularity=ga, block=128)
        qw, sw = gp.quantize_fp8(up(w).astype("bfloat16"), granularity=gb, block=blk_b)
        xd = gp.dequantize_fp8(qx, sx, out_dtype="float32", block=128).to_numpy()
        wd = gp.dequantize_fp8(qw, sw, out_dtype="float32", block=blk_b).to_numpy()
        r = gp.matmul_fp8(qx, qw, scale_a=sx, scale_b=sw, out_dtype="float32")
        ref = xd.astype(np.float64) @ wd.astype(np.float64).T
        assert_close(r, ref, "float32", rtol=RTOL["float32"], name=ga)
