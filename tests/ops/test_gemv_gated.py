"""gp.linear_silu_mul with a quantized gate/up weight [Wg; Wu] on the test device
(ops/_helpers.DEVICE): the gated decode GEMV (ops gemv_<format>_silu_mul) for the formats of
ops/gemv.QUANT_GATED_FORMATS (int4), where the knob ops/gemv.QUANT_GATED_GEMV or a route asks for
it, linear_quantized + silu_mul otherwise (and for the GGUF and W8A8 formats), against the
float64 product with the weight dequantized from its raw layout; and the errors for bad
arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up, view
from ops.test_gemv import HALF, _fsum_product, _ref_dequant
from pygpukit.backends.cpu.gemv import round_to
from pygpukit.routing.crossovers import qgemv_max_rows

QUANT_LAYOUTS = [
    ("fp8", {}),
    ("fp8", {"block": 128}),
    ("int4", {}),
    ("int4", {"scale_dtype": "bfloat16"}),
    ("nvfp4", {}),
]


@pytest.mark.parametrize("gated", [None, False, True], ids=["shipped", "gated-off", "gated-on"])
@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
@pytest.mark.parametrize("lead", [(1,), (2, 3), (4, 6), (3, 13)], ids=str)
@pytest.mark.parametrize("fmt,kw", QUANT_LAYOUTS, ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_linear_silu_mul_quantized(
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    fmt: str,
    kw: dict,
    lead: tuple[int, ...],
    det: bool,
    gated: bool | None,
) -> None:
    """A quantized [Wg; Wu]: with ops/gemv.QUANT_GATED_GEMV on (up to qgemv_max_rows rows), or
    left to QUANT_GATED_FORMATS (None, shipped: int4 at one row), on CUDA outside the
    deterministic mode take the gated decode GEMV (op gemv_<format>_silu_mul: float32 g and u,
    one rounding); anything else gp.linear_quantized + gp.silu_mul (g and u rounded to x's
    dtype first). x strided, out a poisoned array; against float64 with the weight dequantized
    from its raw layout."""
    import importlib

    ops_gemv = importlib.import_module("pygpukit.ops.gemv")
    assert ops_gemv.QUANT_GATED_GEMV is None  # shipped
    assert ops_gemv.QUANT_GATED_FORMATS == {"int4"} and ops_gemv.QUANT_GATED_DEFAULT_MAX_ROWS == 1
    monkeypatch.setattr(ops_gemv, "QUANT_GATED_GEMV", gated)
    rows = math.prod(lead)
    on = fmt == "int4" and rows == 1 if gated is None else gated
    rng = np.random.default_rng(seed("lsm_q", dtype, fmt, str(kw), str(lead), det))
    k, i = 160, 19  # a partial last group / block of 128; an odd intermediate size
    qw = gp.quantize_weight(rand(rng, (2 * i, k), "float32"), fmt, device=DEVICE, **kw)
    x = rand(rng, (*lead, k), dtype)
    out = poisoned((*lead, i), dtype)
    gp.routing.reset_stats()
    with gp.deterministic(det):
        y = gp.linear_silu_mul(view(x, "strided"), qw, out=out)
    assert y is out
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    fused = on and DEVICE != "cpu" and rows <= qgemv_max_rows(fmt, 2 * i, k) and not det
    assert (f"gemv_{fmt}_silu_mul" in ran) == fused and ("silu_mul" in ran) != fused
    h = as64(x) @ _ref_dequant(qw).T
    g, u = h[..., :i], h[..., i:]
    if not fused:
        g, u = as64(round_to(g, x.dtype)), as64(round_to(u, x.dtype))
    assert_close(y, g / (1.0 + np.exp(-g)) * u, x.dtype)


@pytest.mark.parametrize("fmt,kw", QUANT_LAYOUTS, ids=str)
def test_gated_quantized_op_on_a_route(fmt: str, kw: dict) -> None:
    """A route naming op gemv_<format>_silu_mul runs it at any row count; on the CPU it is the
    NumPy reference: float64 g and u, silu(g) * u rounded once."""
    rng = np.random.default_rng(seed("lsm_q_route", fmt, str(kw)))
    k, i = 96, 24
    qw = gp.quantize_weight(rand(rng, (2 * i, k), "float32"), fmt, device=DEVICE, **kw)
    x = rand(rng, (50, k), "bfloat16")  # past every format's crossover
    op = f"gemv_{fmt}_silu_mul"
    gp.routing.reset_stats()
    with gp.route(**{op: "cpu" if DEVICE == "cpu" else "native"}):
        y = gp.linear_silu_mul(up(x), qw)
    assert gp.routing.stats()[op] and not sum(gp.routing.stats().get("silu_mul", {}).values())
    h = _fsum_product(as64(x), _ref_dequant(qw), None)
    g = h[:, :i]
    want = g / (1.0 + np.exp(-g)) * h[:, i:]
    if DEVICE == "cpu":
        np.testing.assert_array_equal(
            y.to_numpy().astype(np.float64), round_to(want, x.dtype).astype(np.float64)
        )
    else:
        assert_close(y, want, x.dtype)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_k", "w8a8"])
def test_linear_silu_mul_gguf_and_w8a8_take_two_ops(fmt: str) -> None:
    """A GGUF block weight and a W8A8 one have no gated kernel: linear_quantized + silu_mul,
    within the dtype's bound of the float64 product (g and u rounded to x's dtype first; W8A8
    also quantizes x per row, so against that recipe's loose bound)."""
    from _gguf_ref import random_blocks

    rng = np.random.default_rng(seed("lsm_gguf", fmt))
    k, i = 256, 8
    if fmt == "w8a8":
        qw = gp.quantize_weight(rand(rng, (2 * i, k), "float32"), "w8a8", device=DEVICE)
    else:
        qw = gp.QuantizedWeight(fmt, up(random_blocks(fmt, 2 * i, k, seed=3)))
    x = rand(rng, (3, k), "bfloat16")
    gp.routing.reset_stats()
    y = gp.linear_silu_mul(up(x), qw)
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    assert "silu_mul" in ran and not any(op.endswith("_silu_mul") for op in ran - {"silu_mul"})
    h = as64(x) @ qw.dequantize().T
    g, u = as64(round_to(h[:, :i], x.dtype)), as64(round_to(h[:, i:], x.dtype))
    want = g / (1.0 + np.exp(-g)) * u
    if fmt == "w8a8":  # x's e4m3 codes: about 2^-4 relative per product
        assert np.allclose(as64(y.to_numpy()), want, rtol=0.1, atol=0.1 * np.abs(want).max())
    else:
        assert_close(y, want, x.dtype)


def test_linear_silu_mul_quantized_rejects_bad_arguments() -> None:
    rng = np.random.default_rng(seed("lsm_q_bad"))
    qw = gp.quantize_weight(rand(rng, (6, 32), "float32"), "int4", device=DEVICE)
    odd = gp.quantize_weight(rand(rng, (5, 32), "float32"), "int4", device=DEVICE)
    x = up(rand(rng, (2, 32), "bfloat16"))
    with pytest.raises(ValueError, match=r"linear_silu_mul: w_gate_up must hold 2 \* intermediate"):
        gp.linear_silu_mul(x, odd)
    with pytest.raises(ValueError, match=r"linear_silu_mul: x has shape \(2, 16\)"):
        gp.linear_silu_mul(up(rand(rng, (2, 16), "bfloat16")), qw)
    with pytest.raises(TypeError, match=r"linear_silu_mul: x must be a float16 or bfloat16"):
        gp.linear_silu_mul(x.astype("float32"), qw)
    with pytest.raises(ValueError, match=r"linear_silu_mul: out has shape \(2, 6\)"):
        gp.linear_silu_mul(x, qw, out=poisoned((2, 6), "bfloat16"))
    assert gp.linear_silu_mul(x, qw).shape == (2, 3)
