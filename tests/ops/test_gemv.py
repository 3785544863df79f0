"""Public gemv and linear_quantized on the test device (ops/_helpers.DEVICE): argument checks
(errors naming the problem, before anything runs) and results against an independent float64
reference: on the CPU the NumPy backend must equal it rounded once, exactly; on a GPU the native
kernels must hold the bound their .cu files document."""

from __future__ import annotations

import inspect
import math

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up, view
from pygpukit.backends.cpu.gemv import E2M1_VALUES, round_to
from pygpukit.routing.crossovers import QDENSE_MIN_ROWS, QGEMV_MAX_ROWS, qgemv_max_rows

HALF = ["bfloat16", "float16"]


def _fsum_product(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """x [..., K] @ w[N, K]^T (+ bias) with exactly rounded sums (math.fsum), float64."""
    rows = x.reshape(-1, x.shape[-1])
    y = np.array([[math.fsum(r * c) for c in w] for r in rows]).reshape((*x.shape[:-1], -1))
    return y if bias is None else y + bias


def _expect(y: gp.GPUArray, x: np.ndarray, w64: np.ndarray, b: np.ndarray) -> None:
    """CPU: y is the exact product rounded once. GPU: docs/design.md's bound and the kernels' own,
    |y - ref| <= u |ref| + (K/4 + 32) 2^-24 (|x| @ |W|^T + |b|) (native/src/gemv/*.cu)."""
    ref = _fsum_product(as64(x), w64, as64(b))
    got = y.to_numpy().astype(np.float64)
    if DEVICE == "cpu":
        np.testing.assert_array_equal(got, round_to(ref, x.dtype).astype(np.float64))
        return
    assert_close(y, ref, x.dtype)
    u = 2.0**-8 if x.dtype == ml_dtypes.bfloat16 else 2.0**-11
    mag = np.abs(as64(x)) @ np.abs(w64).T + np.abs(as64(b))
    assert (np.abs(got - ref) <= u * np.abs(ref) + (w64.shape[1] / 4 + 32) * 2.0**-24 * mag).all()


# ----- results ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("shape", [(1, 8), (3, 136), (2, 3, 40)], ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_gemv(dtype: str, shape: tuple, layout: str) -> None:
    rng = np.random.default_rng(seed("gemv_op", dtype, shape, layout))
    k = shape[-1]
    x, w, b = rand(rng, shape, dtype), rand(rng, (13, k), dtype), rand(rng, 13, dtype)
    out = poisoned((*shape[:-1], 13), dtype)
    y = gp.gemv(view(x, layout), up(w), up(b), out=out)
    assert y is out
    _expect(y, x, as64(w), b)


def _ref_dequant(qw: gp.QuantizedWeight) -> np.ndarray:
    """Dequantize from the raw layout, independently of pygpukit's dequantizers."""
    n, k = qw.shape
    s = as64(qw.scales.to_numpy())
    if qw.format == "nvfp4":
        raw = qw.data.to_numpy()
        codes = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(n, k)  # low nibble = even k
        blk = np.arange(k) // 16
        return E2M1_VALUES[codes] * s[:, blk] * qw.global_scale
    vals = as64(qw.data.to_numpy())
    if qw.format in ("fp8", "w8a8") and qw.block == 0:
        return vals * s.reshape(n, 1)
    return vals * s[:, np.arange(k) // 128]


@pytest.mark.parametrize(
    "fmt,kw",
    [
        ("fp8", {}),
        ("fp8", {"block": 128}),
        ("int4", {}),
        ("int4", {"scale_dtype": "bfloat16"}),
        ("int4", {"scale_dtype": "float16"}),
        ("nvfp4", {}),
    ],
    ids=lambda v: str(v),
)
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    "lead", [(2, 3), (2, 30), (3, 100)], ids=["gemv-rows", "gemm-rows", "dense-rows"]
)
def test_linear_quantized(dtype: str, fmt: str, kw: dict, lead: tuple[int, int]) -> None:
    """6 rows take the decode GEMV, 60 rows (past QGEMV_MAX_ROWS) the mixed-input GEMM, 300
    rows on a GPU (past QDENSE_MIN_ROWS for int4 and nvfp4) the weight dequantized to x's dtype
    and gp.linear; the CPU keeps the exact weight at every row count."""
    rng = np.random.default_rng(seed("lq_op", dtype, fmt, str(kw), str(lead)))
    k = 160  # a partial last group/block of 128
    w = rand(rng, (11, k), "float32")
    qw = gp.quantize_weight(w, fmt, device=DEVICE, **kw)
    assert qw.shape == (11, k) and qw.device == gp.device(DEVICE)
    x, b = rand(rng, (*lead, k), dtype), rand(rng, 11, dtype)
    out = poisoned((*lead, 11), dtype)
    gp.routing.reset_stats()
    y = gp.linear_quantized(view(x, "strided"), qw, up(b), out=out)
    assert y is out
    rows = lead[0] * lead[1]
    dense = rows >= QDENSE_MIN_ROWS[fmt] and DEVICE != "cpu"
    if dense:  # W rounded once to x's dtype, then gp.linear
        w_x = as64(round_to(_ref_dequant(qw), x.dtype))
        assert_close(y, _fsum_product(as64(x), w_x, as64(b)), x.dtype)
    else:
        _expect(y, x, _ref_dequant(qw), b)
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    if dense:
        assert {"dequantize_weight", "linear"} <= ran
    else:
        assert f"{'gemv' if rows <= qgemv_max_rows(fmt, 11, k) else 'qgemm'}_{fmt}" in ran
    np.testing.assert_array_equal(qw.dequantize(), _ref_dequant(qw))


@pytest.mark.parametrize("fmt", ["fp8", "int4", "nvfp4"])
def test_crossover_by_shape(fmt: str) -> None:
    """24 rows: fp8 keeps the decode GEMV for a weight with N <= 1.5 K (square, deep, a GQA qkv)
    and takes the mixed-input GEMM for a wider one, and at 33 rows for any; int4 and nvfp4 keep the
    GEMV up to their own crossovers (32, 48) for every shape."""
    limit = {"fp8": 16, "int4": 32, "nvfp4": 48}[fmt]
    deep = 32 if fmt == "fp8" else limit
    assert QGEMV_MAX_ROWS[fmt] == limit
    assert qgemv_max_rows(fmt, 4096, 14336) == deep
    assert qgemv_max_rows(fmt, 4096, 4096) == deep
    assert qgemv_max_rows(fmt, 6144, 4096) == deep  # N = 1.5 K
    assert qgemv_max_rows(fmt, 6145, 4096) == limit
    assert qgemv_max_rows(fmt, 8192, 28672) == deep
    assert qgemv_max_rows(fmt, 14336, 4096) == limit
    rng = np.random.default_rng(seed("lq_shape", fmt))
    cases = ((40, 96, 24, True), (144, 96, 24, True), (152, 96, 24, False), (96, 96, 33, False))
    for n, k, rows, on_gemv in cases:
        qw = gp.quantize_weight(rand(rng, (n, k), "float32"), fmt, device=DEVICE)
        x, bias = rand(rng, (rows, k), "bfloat16"), rand(rng, n, "bfloat16")
        gp.routing.reset_stats()
        y = gp.linear_quantized(up(x), qw, up(bias))
        _expect(y, x, _ref_dequant(qw), bias)
        ran = {op for op, c in gp.routing.stats().items() if sum(c.values())}
        gemv = rows <= limit or (on_gemv and fmt == "fp8")
        assert (f"gemv_{fmt}" in ran) == gemv and (f"qgemm_{fmt}" in ran) != gemv, (n, k, rows)


@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("lead", [(1,), (2, 3), (3, 13)], ids=str)
def test_linear_quantized_w8a8(dtype: str, lead: tuple[int, ...], det: bool) -> None:
    """x quantized per row to e4m3 (scale = amax / 448), then the product with the per-channel
    fp8 weight: against that recipe computed here in float64, and within e4m3's error of the
    exact product. x strided, bias, out a column slice of a poisoned wider array."""
    rng = np.random.default_rng(seed("w8a8", dtype, str(lead)))
    k, n = 96, 24
    w = rand(rng, (n, k), "float32")
    qw = gp.quantize_weight(w, "w8a8", device=DEVICE)
    assert (qw.format, qw.block, qw.shape) == ("w8a8", 0, (n, k))
    x, b = rand(rng, (*lead, k), dtype), rand(rng, n, dtype)
    wide = poisoned((*lead, n + 6), dtype)
    out = wide[..., 2 : 2 + n]
    gp.routing.reset_stats()
    with gp.deterministic(det):
        y = gp.linear_quantized(view(x, "strided"), qw, up(b), out=out)
    assert y is out
    ran = {op for op, c in gp.routing.stats().items() if sum(c.values())}
    assert ("qgemm_w8a8" if det else "matmul_fp8") in ran
    x64 = as64(x)
    scale = np.abs(x64).max(axis=-1, keepdims=True) / 448.0
    scale = np.where(scale == 0, 1.0, scale.astype(np.float32).astype(np.float64))
    qx = as64((x64 / scale).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)) * scale
    recipe = qx @ _ref_dequant(qw).T + as64(b)
    assert_close(y, recipe, dtype)
    exact = x64 @ w.astype(np.float64).T + as64(b)
    assert np.abs(as64(y.to_numpy()) - exact).max() <= 0.06 * np.abs(exact).max()
    rest = as64(wide.to_numpy())
    assert np.isnan(rest[..., :2]).all() and np.isnan(rest[..., 2 + n :]).all()
    assert gp.linear_quantized(up(x)[:0], qw).shape == (0, *lead[1:], n)


def test_round_to_is_one_correct_rounding() -> None:
    # 1 + 2^-8 + 2^-30 lies just above the midpoint of 1 and 1 + 2^-7: one rounding goes up,
    # float64 -> float32 -> bfloat16 (ml_dtypes' cast) lands on the tie and goes to 1.
    v = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8, 3.5e38, np.nan, -0.0])
    got = round_to(v, ml_dtypes.bfloat16).astype(np.float64)
    assert got[0] == 1 + 2**-7 and got[1] == -(1 + 2**-7) and got[2] == 1.0
    assert np.isinf(got[3]) and np.isnan(got[4]) and np.signbit(got[5])
    assert v[:1].astype(ml_dtypes.bfloat16).astype(np.float64)[0] == 1.0  # the double rounding
    rng = np.random.default_rng(3)
    y = rng.standard_normal(20000) * np.exp(rng.uniform(-20, 20, 20000))
    for dt in (ml_dtypes.bfloat16, np.float16):
        r = round_to(y, dt)
        bits = r.view(np.uint16).astype(np.int64)
        for step in (1, -1):  # no neighbour of the result is closer to y
            nb = (bits + step).astype(np.uint16).view(np.dtype(dt)).astype(np.float64)
            with np.errstate(invalid="ignore"):
                closer = np.abs(nb - y) < np.abs(r.astype(np.float64) - y)
            assert not closer[np.isfinite(r.astype(np.float64))].any()


# ----- argument checks -------------------------------------------------------------------------


def _xw(dtype: str = "bfloat16", m: int = 2, k: int = 16, n: int = 5) -> tuple:
    rng = np.random.default_rng(0)
    return up(rand(rng, (m, k), dtype)), up(rand(rng, (n, k), dtype))


def test_gemv_rejects_bad_arguments() -> None:
    x, w = _xw()
    with pytest.raises(TypeError, match="gemv: x must be a GPUArray"):
        gp.gemv(np.zeros((2, 16)), w)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"gemv: x must be a float16 or bfloat16.*float32"):
        gp.gemv(up(np.zeros((2, 16), np.float32)), w)
    with pytest.raises(TypeError, match=r"gemv: weight has .*float16 but x has dtype bfloat16"):
        gp.gemv(x, w.astype("float16"))
    with pytest.raises(ValueError, match=r"gemv: weight must be 2-D"):
        gp.gemv(x, up(np.zeros(16, ml_dtypes.bfloat16)))
    with pytest.raises(ValueError, match=r"gemv: x has shape \(2, 16\).*must be \[\.\.\., 24\]"):
        gp.gemv(x, _xw(k=24)[1])
    xs, ws = _xw(k=12)
    with pytest.raises(ValueError, match="K=12 must be a positive multiple of 8"):
        gp.gemv(xs, ws)
    with pytest.raises(ValueError, match=r"17 rows.*at most 16 \(use gp.linear"):
        gp.gemv(_xw(m=17)[0], w)
    with pytest.raises(ValueError, match="17 rows"):
        gp.gemv(up(np.zeros((1, 17, 16), ml_dtypes.bfloat16)), w)
    with pytest.raises(TypeError, match=r"gemv: bias has .*float32 but x has dtype bfloat16"):
        gp.gemv(x, w, up(np.zeros(5, np.float32)))
    with pytest.raises(ValueError, match=r"gemv: bias has shape \(4,\).*must have shape \(5,\)"):
        gp.gemv(x, w, up(np.zeros(4, ml_dtypes.bfloat16)))
    with pytest.raises(ValueError, match=r"gemv: out has shape \(2, 4\)"):
        gp.gemv(x, w, out=poisoned((2, 4), "bfloat16"))
    with pytest.raises(
        TypeError, match=r"gemv: out has .*float16 but the result dtype is bfloat16"
    ):
        gp.gemv(x, w, out=poisoned((2, 5), "float16"))
    assert gp.gemv(_xw(m=16)[0], w).shape == (16, 5)  # 16 rows are fine
    assert gp.gemv(up(np.ones(16, ml_dtypes.bfloat16)), w).shape == (5,)  # a 1-D x is one row


def test_linear_quantized_rejects_bad_arguments() -> None:
    x, w = _xw(k=32)
    qw = gp.quantize_weight(w, "int4")
    with pytest.raises(TypeError, match="qw must be a QuantizedWeight"):
        gp.linear_quantized(x, w)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="linear_quantized: x must be a float16 or bfloat16"):
        gp.linear_quantized(up(np.zeros((2, 32), np.float32)), qw)
    with pytest.raises(ValueError, match=r"x has shape \(2, 64\).*must be \[\.\.\., 32\]"):
        gp.linear_quantized(_xw(k=64)[0], qw)
    with pytest.raises(TypeError, match=r"linear_quantized: bias has .*float16"):
        gp.linear_quantized(x, qw, up(np.zeros(5, np.float16)))
    with pytest.raises(TypeError, match=r"out has .*float16 but the result dtype is bfloat16"):
        gp.linear_quantized(x, qw, out=poisoned((2, 5), "float16"))
    # many rows are served (the kernel walks x in tiles of 16 rows)
    assert gp.linear_quantized(_xw(m=40, k=32)[0], qw).shape == (40, 5)


def test_native_adapters_match_the_reference_signatures() -> None:
    """The routing table calls native and cpu candidates the same way: same parameters (the
    native ones add out=)."""
    from pygpukit.backends import cpu
    from pygpukit.backends.native import gemv as nat
    from pygpukit.routing.table import TABLE

    gated = ("gemv_fp8_silu_mul", "gemv_int4_silu_mul", "gemv_nvfp4_silu_mul")
    for op in ("gemv", "gemv_fp8", "gemv_int4", "gemv_nvfp4", *gated):
        want = list(inspect.signature(getattr(cpu, op)).parameters)
        got = [p for p in inspect.signature(getattr(nat, op)).parameters if p != "out"]
        assert got == want, op
        route = TABLE[op]
        assert [c.backend for c in route.candidates] == ["native", "triton", "cpu"]
        assert route.family == "gemv"
    for op in ("linear_gemv", "linear_silu_mul", "rmsnorm_linear"):
        assert [c.backend for c in TABLE[op].candidates] == ["triton", "cpu"]
    for op in ("rmsnorm_gemv_fp8", "rmsnorm_gemv_int4", "rmsnorm_gemv_nvfp4"):
        want = list(inspect.signature(getattr(cpu, op)).parameters)
        got = [p for p in inspect.signature(getattr(nat, op)).parameters if p != "out"]
        assert got == want, op
        assert [c.backend for c in TABLE[op].candidates] == ["native", "cpu"]
        assert TABLE[op].family == "gemv"
    pytest.importorskip("triton")
    from pygpukit.backends.triton_kernels import gemv as tgemv
    from pygpukit.backends.triton_kernels import qgemm

    for op in ("gemv", "linear_gemv", "linear_silu_mul", "rmsnorm_linear", *gated):
        want = list(inspect.signature(getattr(cpu, op)).parameters)
        assert [p for p in inspect.signature(getattr(tgemv, op)).parameters if p != "out"] == want
    for fmt in ("fp8", "int4", "nvfp4"):
        want = list(inspect.signature(getattr(cpu, f"gemv_{fmt}")).parameters)
        from pygpukit.backends.native import qgemm as nq

        fns = (getattr(tgemv, f"gemv_{fmt}"), getattr(qgemm, f"qgemm_{fmt}"))
        for fn in (*fns, getattr(nq, f"qgemm_{fmt}"), getattr(cpu, f"qgemm_{fmt}")):
            assert [p for p in inspect.signature(fn).parameters if p != "out"] == want
        backends = [c.backend for c in TABLE[f"qgemm_{fmt}"].candidates]
        assert backends == ["triton", "native", "cpu"]
    from pygpukit.backends.cpu import qgemm as cq
    from pygpukit.backends.native import mixed_gemm as nm

    for op in ("qgemm_int4_dense", "qgemm_fp8_dense"):
        want = list(inspect.signature(getattr(cq, op)).parameters)
        assert [p for p in inspect.signature(getattr(nm, op)).parameters if p != "out"] == want
        route = TABLE[op]
        assert [(c.backend, route.family_of(c)) for c in route.candidates] == [
            ("native", "mixed_gemm"),
            ("cpu", "qgemm"),
        ]


def test_linear_keeps_cublaslt_in_the_native_backend() -> None:
    """The native backend's own crossover to its GEMV kernel stays off (cuBLASLt was as fast in
    isolation); gp.linear's one-row decode path is decided in the ops layer (next tests)."""
    import os

    from pygpukit.backends.native import matmul as native

    assert native.GEMV_MAX_M == {"small": 0, "large": 0}
    if "PYGPUKIT_GEMV_MAX_M" not in os.environ:
        assert native._gemv_top[0] == 0


@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
@pytest.mark.parametrize("lead", [(1,), (1, 1), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [*HALF, "float32"])
def test_linear_silu_mul(dtype: str, lead: tuple[int, ...], det: bool) -> None:
    """silu(x Wg^T) * (x Wu^T) over the stacked [Wg; Wu] against float64. One half-precision row
    on CUDA outside the deterministic mode is the fused GEMV (op linear_silu_mul: one rounding);
    anything else is gp.linear + gp.silu_mul (g and u rounded first), and gp.linear's one row
    takes op gemv on the same terms."""
    rng = np.random.default_rng(seed("lsm_op", dtype, str(lead), det))
    k, i = 72, 19
    x, w = rand(rng, (*lead, k), dtype), rand(rng, (2 * i, k), dtype)
    out = poisoned((*lead, i), dtype)
    gp.routing.reset_stats()
    with gp.deterministic(det):
        y = gp.linear_silu_mul(up(x), up(w), out=out)
        lin = gp.linear(up(x), up(w))
    assert y is out
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    fused = DEVICE != "cpu" and dtype != "float32" and math.prod(lead) == 1 and not det
    assert ("linear_silu_mul" in ran) == fused and ("silu_mul" in ran) != fused
    assert ("linear_gemv" in ran) == fused and ("linear" in ran) != fused
    h = as64(x) @ as64(w).T
    g, u = h[..., :i], h[..., i:]
    if not fused:  # the composite rounds g and u to x's dtype before silu_mul
        g, u = as64(round_to(g, x.dtype)), as64(round_to(u, x.dtype))
    assert_close(y, g / (1.0 + np.exp(-g)) * u, x.dtype)
    assert_close(lin, h, x.dtype)


def test_linear_silu_mul_rejects_bad_arguments() -> None:
    x, w = _xw(n=6)
    with pytest.raises(TypeError, match="linear_silu_mul: x must be a GPUArray"):
        gp.linear_silu_mul(np.zeros((2, 16)), w)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"linear_silu_mul: w_gate_up must be \[2 \* intermediate"):
        gp.linear_silu_mul(x, _xw(n=5)[1])
    with pytest.raises(ValueError, match=r"linear_silu_mul: x has shape \(2, 16\).*\[\.\.\., 24\]"):
        gp.linear_silu_mul(x, _xw(k=24, n=6)[1])
    with pytest.raises(TypeError, match=r"w_gate_up has .*float16 but x has dtype bfloat16"):
        gp.linear_silu_mul(x, w.astype("float16"))
    with pytest.raises(
        TypeError, match=r"linear_silu_mul: x must be a float16/bfloat16/float32/float64 array"
    ):
        gp.linear_silu_mul(up(np.zeros((2, 16), np.int32)), w)
    with pytest.raises(ValueError, match=r"linear_silu_mul: out has shape \(2, 6\)"):
        gp.linear_silu_mul(x, w, out=poisoned((2, 6), "bfloat16"))
    assert gp.linear_silu_mul(x, w).shape == (2, 3)


def test_routes_that_force_linear_or_the_fused_op() -> None:
    """A route forcing op linear keeps one row on it (no diversion to the decode GEMV); a route
    forcing op linear_silu_mul runs the fused op at any row count (here the NumPy reference
    on the CPU: float64, one rounding)."""
    rng = np.random.default_rng(seed("lsm_route"))
    x, w = rand(rng, (1, 64), "bfloat16"), rand(rng, (2 * 24, 64), "bfloat16")
    gp.routing.reset_stats()
    with gp.route(linear="cpu" if DEVICE == "cpu" else "native"):
        gp.linear(up(x), up(w))
        gp.linear_silu_mul(up(x), up(w))
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    assert {"linear", "silu_mul"} <= ran and not {"linear_gemv", "linear_silu_mul"} & ran
    if DEVICE != "cpu":
        return
    gp.routing.reset_stats()
    with gp.route("*:cpu"):  # a "*" rule does not pull many rows onto the fused op
        gp.linear_silu_mul(up(rand(rng, (3, 64), "bfloat16")), up(w))
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    assert {"linear", "silu_mul"} <= ran and "linear_silu_mul" not in ran
    x3 = rand(rng, (3, 64), "bfloat16")
    with gp.route(linear_silu_mul="cpu"):
        y = gp.linear_silu_mul(up(x3), up(w))
    h = as64(x3) @ as64(w).T
    g = h[:, :24]
    np.testing.assert_array_equal(
        y.to_numpy().astype(np.float64),
        round_to(g / (1.0 + np.exp(-g)) * h[:, 24:], x3.dtype).astype(np.float64),
    )


@pytest.mark.skipif(DEVICE == "cpu", reason="the one-row diversion runs on CUDA")
def test_linear_one_row_on_the_decode_gemv() -> None:
    """gp.linear's one-row path (op linear_gemv) with a bias, out=, a 1-D x; a transposed
    weight (rows not at unit stride) stays on op linear."""
    rng = np.random.default_rng(seed("lin_row"))
    x, w, b = rand(rng, 40, "bfloat16"), rand(rng, (24, 40), "bfloat16"), rand(rng, 24, "bfloat16")
    out = poisoned((24,), "bfloat16")
    gp.routing.reset_stats()
    y = gp.linear(up(x), up(w), up(b), out=out)
    assert y is out and y.shape == (24,)
    _expect(y.reshape(1, 24), x[None, :], as64(w), b)
    ran = {op for op, c in gp.routing.stats().items() if sum(c.values())}
    assert "linear_gemv" in ran and "linear" not in ran
    gp.routing.reset_stats()
    wt = up(np.ascontiguousarray(w.T)).T  # [24, 40] read at a stride of 24
    assert_close(gp.linear(up(x), wt), as64(x) @ as64(w).T, "bfloat16")
    ran = {op for op, c in gp.routing.stats().items() if sum(c.values())}
    assert "linear" in ran and "linear_gemv" not in ran


def _rms_ref(h: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    out: np.ndarray = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * g
    return out


@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
@pytest.mark.parametrize("lead", [(1,), (1, 1), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [*HALF, "float32"])
def test_rmsnorm_linear(dtype: str, lead: tuple[int, ...], det: bool) -> None:
    """gp.rmsnorm_linear against float64, with and without a residual. One half-precision row
    on CUDA outside the deterministic mode is the fused kernel (the normalised row not rounded:
    one rounding at the end); anything else is gp.rmsnorm then gp.linear (the normalised row
    rounded to x's dtype first). h = x + residual has the bits of gp.rmsnorm(residual=)'s h on
    every path."""
    rng = np.random.default_rng(seed("rms_lin", dtype, str(lead), det))
    k, n, eps = 72, 19, 1e-5
    x, r = rand(rng, (*lead, k), dtype) * 2, rand(rng, (*lead, k), dtype)
    g = (1 + rand(rng, k, "float64") / 4).astype(x.dtype)
    w, b = rand(rng, (n, k), dtype), rand(rng, n, dtype)
    out = poisoned((*lead, n), dtype)
    gp.routing.reset_stats()
    with gp.deterministic(det):
        y, h = gp.rmsnorm_linear(up(x), up(g), up(w), up(b), eps=eps, residual=up(r))
        y1 = gp.rmsnorm_linear(up(x), up(g), up(w), up(b), eps=eps, out=out)
    assert y1 is out
    ran = {o for o, c in gp.routing.stats().items() if sum(c.values())}
    _, h_ref = gp.rmsnorm(up(x), up(g), eps, residual=up(r))
    fused = DEVICE != "cpu" and dtype != "float32" and math.prod(lead) == 1 and not det
    assert ("rmsnorm_linear" in ran) == fused and ("rmsnorm" in ran) != fused
    np.testing.assert_array_equal(h.to_numpy(), h_ref.to_numpy())
    for got, hh in ((y, as64(h.to_numpy())), (y1, as64(x))):
        nrm = _rms_ref(hh, as64(g), eps)
        if not fused:
            nrm = as64(round_to(nrm, x.dtype))
        assert got.shape == (*lead, n)
        assert_close(got, nrm @ as64(w).T + as64(b), x.dtype)


def test_rmsnorm_linear_routes_and_cpu_reference() -> None:
    """A route naming the fused op runs it at any row count: on the CPU the NumPy reference,
    float64 throughout (the normalised row not rounded), one rounding, exactly."""
    if DEVICE != "cpu":
        pytest.skip("the NumPy reference's exact bits")
    rng = np.random.default_rng(seed("rms_lin_route"))
    x, r = rand(rng, (3, 64), "bfloat16"), rand(rng, (3, 64), "bfloat16")
    g, w = rand(rng, 64, "bfloat16"), rand(rng, (40, 64), "bfloat16")
    gp.routing.reset_stats()
    with gp.route(rmsnorm_linear="cpu"):
        y, h = gp.rmsnorm_linear(up(x), up(g), up(w), eps=1e-6, residual=up(r))
        y1 = gp.rmsnorm_linear(up(x), up(g), up(w), eps=1e-6)
    ran = {o for o, c in gp.routing.stats().items() if sum(c.values())}
    assert ran == {"rmsnorm_linear"}
    h64 = as64(round_to(as64(x) + as64(r), x.dtype))
    np.testing.assert_array_equal(as64(h.to_numpy()), h64)
    for got, hh in ((y, h64), (y1, as64(x))):
        want = round_to(_rms_ref(hh, as64(g), 1e-6) @ as64(w).T, x.dtype)
        np.testing.assert_array_equal(as64(got.to_numpy()), as64(want))


def test_rmsnorm_linear_rejects_bad_arguments() -> None:
    x, w = _xw(n=6)
    g = up(np.ones(16, ml_dtypes.bfloat16))
    op = "rmsnorm_linear"
    with pytest.raises(TypeError, match=f"{op}: x must be a GPUArray"):
        gp.rmsnorm_linear(np.zeros((2, 16)), g, w)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=rf"{op}: norm_weight has shape \(8,\)"):
        gp.rmsnorm_linear(x, g[:8], w)
    with pytest.raises(ValueError, match=f"{op}: eps must be a non-negative number"):
        gp.rmsnorm_linear(x, g, w, eps=-1.0)
    with pytest.raises(ValueError, match=rf"{op}: x has shape \(2, 16\).*\[\.\.\., 24\]"):
        gp.rmsnorm_linear(x, g, _xw(k=24, n=6)[1])
    with pytest.raises(ValueError, match=f"{op}: weight must be 2-D"):
        gp.rmsnorm_linear(x, g, g)
    with pytest.raises(TypeError, match=r"weight has .*float16 but x has dtype bfloat16"):
        gp.rmsnorm_linear(x, g, w.astype("float16"))
    with pytest.raises(ValueError, match=rf"{op}: residual has shape \(2, 8\)"):
        gp.rmsnorm_linear(x, g, w, residual=x[:, :8])
    with pytest.raises(ValueError, match=f"{op}: out= is not supported with residual="):
        gp.rmsnorm_linear(x, g, w, residual=x, out=poisoned((2, 6), "bfloat16"))
    with pytest.raises(ValueError, match=f"{op}: bias has shape"):
        gp.rmsnorm_linear(x, g, w, up(np.ones(5, ml_dtypes.bfloat16)))
    with pytest.raises(ValueError, match=rf"{op}: out has shape \(2, 3\)"):
        gp.rmsnorm_linear(x, g, w, out=poisoned((2, 3), "bfloat16"))
    y, h = gp.rmsnorm_linear(x, g, w, residual=x)
    assert y.shape == (2, 6) and h.shape == (2, 16)


def test_qgemm_dense_ops_round_the_weight_to_x_dtype() -> None:
    """The NumPy references of ops qgemm_int4_dense and qgemm_fp8_dense (the dense path's
    product as one op): each weight value rounded once to x's dtype, then the float64 product
    rounded once; equal to dequantize_weight followed by the float64 product, and (int4) not to
    the exact-weight qgemm_int4 when the scales are not exact in x's dtype."""
    from pygpukit.backends import cpu
    from pygpukit.backends.cpu.gemv import quantize_fp8_weight, quantize_int4_weight

    rng = np.random.default_rng(seed("qdense"))
    w = rng.standard_normal((24, 256))
    vals, scales = quantize_int4_weight(w, 128, np.float32)
    data = vals.astype(ml_dtypes.int4)
    x = rng.standard_normal((5, 256)).astype(np.float16)
    b = rng.standard_normal(24).astype(np.float16)
    from pygpukit.backends.cpu import qgemm as cq

    got = cq.qgemm_int4_dense(x, data, scales, b, group=128)
    w_x = cpu.dequantize_weight(data, scales, fmt="int4", block=128, global_scale=1.0,
                                out_dtype=np.float16)  # fmt: skip
    want = round_to(as64(x) @ as64(w_x).T + as64(b), np.float16)
    np.testing.assert_array_equal(got, want)
    exact = cpu.qgemm_int4(x, data, scales, b, group=128)
    assert not np.array_equal(got, exact)
    for block in (0, 128):  # fp8: per-channel and 128-block scales
        codes, s8 = quantize_fp8_weight(w, block)
        data8 = codes.astype(ml_dtypes.float8_e4m3fn)
        got = cq.qgemm_fp8_dense(x, data8, s8, b, block=block)
        w_x = cpu.dequantize_weight(data8, s8, fmt="fp8", block=block, global_scale=1.0,
                                    out_dtype=np.float16)  # fmt: skip
        np.testing.assert_array_equal(got, round_to(as64(x) @ as64(w_x).T + as64(b), np.float16))


def test_dense_path_takes_the_one_product_op_where_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """linear_quantized's dense rows (QDENSE_MIN_ROWS on) of an int4 weight go to op
    qgemm_int4_dense below QDENSE_FUSED_MAX_ROWS rows where a backend serves it, else expand
    the weight (dequantize_weight, then linear); fewer rows never ask."""
    import importlib

    from pygpukit.routing.crossovers import QDENSE_FUSED_MAX_ROWS

    ops_gemv = importlib.import_module("pygpukit.ops.gemv")  # gp.ops.gemv is the function
    asked: list[str] = []
    ran: list[str] = []
    answer = True

    def serves(op: str, dev: object, inputs: object, params: object) -> bool:
        asked.append(op)
        return answer

    def run(op: str, inputs: object, params: object, out: object = None) -> str:
        ran.append(op)
        return op

    monkeypatch.setattr(ops_gemv, "serves", serves)
    monkeypatch.setattr(ops_gemv, "run", run)
    monkeypatch.setattr(ops_gemv, "_dense_path", lambda fmt, x: True)
    mm = importlib.import_module("pygpukit.ops.matmul")
    monkeypatch.setattr(mm, "linear", lambda x, w, bias=None, out=None: "linear")
    qw = gp.quantize_weight(np.ones((8, 128), np.float32), "int4", device="cpu")
    lo, hi = QDENSE_MIN_ROWS["int4"], QDENSE_FUSED_MAX_ROWS["int4"]
    for rows, ok, want_ran, want_asked in (
        (lo - 1, True, ["qgemm_int4"], []),
        (lo, True, ["qgemm_int4_dense"], ["qgemm_int4_dense"]),
        (hi - 1, True, ["qgemm_int4_dense"], ["qgemm_int4_dense"]),
        (hi, True, ["dequantize_weight"], []),
        (lo, False, ["dequantize_weight"], ["qgemm_int4_dense"]),
    ):
        answer = ok
        asked.clear()
        ran.clear()
        gp.linear_quantized(gp.zeros((rows, 128), "float16", device="cpu"), qw)
        assert (ran, asked) == (want_ran, want_asked), rows
    qf = gp.quantize_weight(np.ones((8, 128), np.float32), "fp8", device="cpu")
    asked.clear()
    gp.linear_quantized(gp.zeros((QDENSE_MIN_ROWS["fp8"], 128), "float16", device="cpu"), qf)
    assert asked == ["qgemm_fp8_dense"]
    qn = gp.quantize_weight(np.ones((8, 128), np.float32), "nvfp4", device="cpu")
    asked.clear()
    gp.linear_quantized(gp.zeros((QDENSE_MIN_ROWS["nvfp4"], 128), "float16", device="cpu"), qn)
    assert asked == []  # no one-product op for nvfp4
