"""gp.rmsnorm_linear with a quantized weight on the test device (ops/_helpers.DEVICE): one row of
half-precision x on CUDA outside the deterministic mode is one launch (op
rmsnorm_gemv_<format>, the native kernel, for the formats of ops/gemv.QUANT_NORM_FORMATS);
anything else gp.rmsnorm then gp.linear_quantized. Both round the normalised row to x's dtype
before the product, so both are checked against the float64 product of that rounded row with
the weight dequantized from its raw layout; h = x + residual has gp.rmsnorm(residual=)'s bits on
every path. Plus the op's NumPy reference on a route, and the errors for bad arguments."""

from __future__ import annotations

import importlib
import math

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up, view
from ops.test_gemv import HALF, _ref_dequant
from pygpukit.backends.cpu.gemv import round_to

QUANT_LAYOUTS = [
    ("fp8", {}),
    ("fp8", {"block": 128}),
    ("int4", {}),
    ("int4", {"scale_dtype": "bfloat16"}),
    ("nvfp4", {}),
]


def _rms64(h: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    out: np.ndarray = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * g
    return out


def _ran() -> set[str]:
    return {o for o, c in gp.routing.stats().items() if sum(c.values())}


@pytest.mark.parametrize("limit", [None, "QUANT_NORM_MAX_N", "QUANT_NORM_MAX_K"])
@pytest.mark.parametrize("knob", [None, False, True], ids=["shipped", "norm-off", "norm-on"])
@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
@pytest.mark.parametrize("lead", [(1,), (1, 1), (2, 3)], ids=str)
@pytest.mark.parametrize("fmt,kw", QUANT_LAYOUTS, ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_rmsnorm_linear_quantized(
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    fmt: str,
    kw: dict,
    lead: tuple[int, ...],
    det: bool,
    knob: bool | None,
    limit: str | None,
) -> None:
    """With and without a residual, x strided, a bias, out= poisoned. A limit set to 8: the
    shipped rule keeps the product (19 output features, K 160) apart (ops/gemv.QUANT_NORM_MAX_N
    or QUANT_NORM_MAX_K), the knob on does not."""
    ops_gemv = importlib.import_module("pygpukit.ops.gemv")
    assert ops_gemv.QUANT_NORM_GEMV is None  # shipped
    assert ops_gemv.QUANT_NORM_FORMATS == {"fp8", "int4", "nvfp4"}
    assert ops_gemv.QUANT_NORM_MAX_N == 16384 and ops_gemv.QUANT_NORM_MAX_K == 2048
    monkeypatch.setattr(ops_gemv, "QUANT_NORM_GEMV", knob)
    if limit is not None:
        monkeypatch.setattr(ops_gemv, limit, 8)
    on = (fmt in ops_gemv.QUANT_NORM_FORMATS and limit is None) if knob is None else knob
    rng = np.random.default_rng(seed("rms_lin_q", dtype, fmt, str(kw), str(lead), det, knob, limit))
    k, n, eps = 160, 19, 1e-5  # a partial last group / block of 128
    qw = gp.quantize_weight(rand(rng, (n, k), "float32"), fmt, device=DEVICE, **kw)
    x, r = rand(rng, (*lead, k), dtype) * 2, rand(rng, (*lead, k), dtype)
    g = (1 + rand(rng, k, "float64") / 4).astype(x.dtype)
    b = rand(rng, n, dtype)
    out = poisoned((*lead, n), dtype)
    gp.routing.reset_stats()
    with gp.deterministic(det):
        y, h = gp.rmsnorm_linear(view(x, "strided"), up(g), qw, up(b), eps=eps, residual=up(r))
        y1 = gp.rmsnorm_linear(up(x), up(g), qw, up(b), eps=eps, out=out)
    assert y1 is out
    fused = on and DEVICE != "cpu" and math.prod(lead) == 1 and not det
    ran = _ran()
    assert (f"rmsnorm_gemv_{fmt}" in ran) == fused and ("rmsnorm" in ran) != fused
    _, h_ref = gp.rmsnorm(up(x), up(g), eps, residual=up(r))
    np.testing.assert_array_equal(h.to_numpy(), h_ref.to_numpy())
    w64 = _ref_dequant(qw)
    for got, hh in ((y, as64(h.to_numpy())), (y1, as64(x))):
        nrm = as64(round_to(_rms64(hh, as64(g), eps), x.dtype))
        assert got.shape == (*lead, n)
        assert_close(got, nrm @ w64.T + as64(b), x.dtype)


@pytest.mark.parametrize("fmt,kw", QUANT_LAYOUTS, ids=str)
def test_rmsnorm_gemv_route_runs_the_cpu_reference(fmt: str, kw: dict) -> None:
    """A route naming the op runs it at any row count: on the CPU the NumPy reference, float64
    throughout (the normalised row not rounded), one rounding, exactly."""
    if DEVICE != "cpu":
        pytest.skip("the NumPy reference's exact bits")
    rng = np.random.default_rng(seed("rms_gemv_route", fmt, str(kw)))
    x, r = rand(rng, (3, 64), "bfloat16"), rand(rng, (3, 64), "bfloat16")
    g = rand(rng, 64, "bfloat16")
    qw = gp.quantize_weight(rand(rng, (40, 64), "float32"), fmt, device=DEVICE, **kw)
    gp.routing.reset_stats()
    with gp.route(**{f"rmsnorm_gemv_{fmt}": "cpu"}):
        y, h = gp.rmsnorm_linear(up(x), up(g), qw, eps=1e-6, residual=up(r))
        y1 = gp.rmsnorm_linear(up(x), up(g), qw, eps=1e-6)
    assert _ran() == {f"rmsnorm_gemv_{fmt}"}
    h64 = as64(round_to(as64(x) + as64(r), x.dtype))
    np.testing.assert_array_equal(as64(h.to_numpy()), h64)
    w64 = _ref_dequant(qw)
    for got, hh in ((y, h64), (y1, as64(x))):
        want = round_to(_rms64(hh, as64(g), 1e-6) @ w64.T, x.dtype)
        np.testing.assert_array_equal(as64(got.to_numpy()), as64(want))


def test_gguf_and_w8a8_weights_take_the_two_ops() -> None:
    """The formats without a norm form (w8a8 here; the GGUF ones likewise) run gp.rmsnorm, then
    gp.linear_quantized."""
    rng = np.random.default_rng(seed("rms_lin_w8a8"))
    x, g = rand(rng, (1, 64), "bfloat16"), rand(rng, 64, "bfloat16")
    qw = gp.quantize_weight(rand(rng, (24, 64), "float32"), "w8a8", device=DEVICE)
    gp.routing.reset_stats()
    y = gp.rmsnorm_linear(up(x), up(g), qw, eps=1e-6)
    assert "rmsnorm" in _ran() and not any(o.startswith("rmsnorm_gemv") for o in _ran())
    want = gp.linear_quantized(gp.rmsnorm(up(x), up(g), 1e-6), qw)
    np.testing.assert_array_equal(y.to_numpy(), want.to_numpy())


def test_rmsnorm_linear_quantized_rejects_bad_arguments() -> None:
    op = "rmsnorm_linear"
    rng = np.random.default_rng(seed("rms_lin_q_bad"))
    qw = gp.quantize_weight(rand(rng, (6, 64), "float32"), "int4", device=DEVICE)
    x = up(rand(rng, (2, 64), "bfloat16"))
    g = up(np.ones(64, ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match=f"{op}: x must be a float16 or bfloat16 array"):
        gp.rmsnorm_linear(x.astype("float32"), g.astype("float32"), qw)
    with pytest.raises(ValueError, match=rf"{op}: norm_weight has shape \(32,\)"):
        gp.rmsnorm_linear(x, g[:32], qw)
    with pytest.raises(ValueError, match=rf"{op}: x has shape \(2, 32\).*\[\.\.\., 64\]"):
        gp.rmsnorm_linear(x[:, :32], g[:32], qw)
    with pytest.raises(ValueError, match=f"{op}: bias has shape"):
        gp.rmsnorm_linear(x, g, qw, up(np.ones(5, ml_dtypes.bfloat16)))
    with pytest.raises(ValueError, match=f"{op}: out= is not supported with residual="):
        gp.rmsnorm_linear(x, g, qw, residual=x, out=poisoned((2, 6), "bfloat16"))
    with pytest.raises(ValueError, match=rf"{op}: out has shape \(2, 3\)"):
        gp.rmsnorm_linear(x, g, qw, out=poisoned((2, 3), "bfloat16"))
    y, h = gp.rmsnorm_linear(x, g, qw, residual=x)  # still usable after the errors
    assert y.shape == (2, 6) and h.shape == (2, 64)
