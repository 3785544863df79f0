"""Decode GEMV and quantized-weight linear: gemv, linear_quantized.

Both compute y = x @ W^T + bias with W stored [N, K] (torch.nn.Linear layout) for x of dtype
float16 or bfloat16, a float32 accumulator and one rounding to x's dtype; the NumPy backend is
the float64 product of x with the (dequantized) weight, rounded once.

- ``gemv(x, weight, bias)``: a dense weight of x's dtype, for at most 16 rows of x (the leading
  dims of x multiplied: decode, speculative verification): the native kernel, or its Triton
  twin (under the deterministic mode: each row computed on its own). Larger products belong to
  ``gp.linear`` (cuBLASLt), which hands one row to the Triton decode GEMV itself (op
  linear_gemv, ``decode_gemv`` below).
- ``linear_silu_mul(x, w_gate_up)``: silu(x @ Wg^T) * (x @ Wu^T) for the stacked [Wg; Wu]
  weight [2I, K] of a gated (SwiGLU) MLP, any floating dtype. With at most DENSE_GEMV_MAX_ROWS
  rows of float16/bfloat16 x on CUDA outside the deterministic mode (``decode_gemv``) it is
  one fused GEMV (op linear_silu_mul, also whenever a route names that op): float32 sums,
  silu(g) * u in float32, one rounding. Otherwise gp.linear then gp.silu_mul on the two halves
  (g and u rounded to x's dtype first), which is what the deterministic mode's batch invariance
  needs. w_gate_up may also be a QuantizedWeight: gp.linear_quantized then gp.silu_mul, or
  for an fp8 / int4 / nvfp4 one the gated decode GEMV (op gemv_<format>_silu_mul: the native
  kernel's row tiles pair each gate row with its up row, one launch, the same float32
  silu(g) * u and one rounding) wherever a route names that op, and on CUDA outside the
  deterministic mode for the formats in QUANT_GATED_FORMATS at one row of x (int4: measured
  faster in the batch-1 decode step; fp8 and nvfp4 slower or level), or for every format up
  to qgemv_max_rows(...) rows with QUANT_GATED_GEMV on.
- ``rmsnorm_linear(x, norm_weight, weight, bias, eps=, residual=)``: gp.rmsnorm then
  gp.linear, the pre-norm block's norm and the dense projection after it. Where
  ``decode_gemv`` takes the product (one half-precision row on CUDA outside the deterministic
  mode, a norm weight of x's dtype) it is one kernel (op rmsnorm_linear): the decode GEMV reads
  the whole row h = x (+ residual) anyway, so it sums h^2 beside its products of h *
  norm_weight and scales each float32 sum by 1 / sqrt(mean(h^2) + eps) at the end. The
  normalised row is never rounded to x's dtype, which the two-op form does before its product:
  the fused result is the more accurate by that one rounding, and its bits differ from the
  two-op form's in the last place. h (x + residual rounded to x's dtype, the residual stream)
  has the bits gp.rmsnorm(residual=) stores. Otherwise (more rows, float32, the deterministic
  mode, a route forcing op linear) the two routed ops run.
  With a QuantizedWeight (fp8, int4, nvfp4) and one half-precision row on CUDA outside the
  deterministic mode, for the formats in QUANT_NORM_FORMATS with K <= QUANT_NORM_MAX_K and N <=
  QUANT_NORM_MAX_N (measured faster: a 1B model's qkv projection; slower at K = 4096 and for a
  large lm_head), it is one launch too (op
  rmsnorm_gemv_<format>, the native kernel): each block of the quantized decode GEMV computes
  h, its rstd and the normalised row (gp.rmsnorm's formula, rounded to x's dtype as the
  tensor cores' operand, as the two-op form rounds it) into shared memory, then runs the
  product; its bits differ from gp.rmsnorm + gp.linear_quantized only where the block's order
  of the sum of squares moves rstd. Otherwise (and for the GGUF formats and w8a8) those two
  routed ops run.
- ``linear_quantized(x, qw, bias)``: W quantized once by ``gp.quantize_weight`` (fp8, int4 or
  nvfp4, pygpukit/qweight.py), dequantized in registers on every call. Any number of rows: up
  to qgemv_max_rows(format, N, K) rows (the routing table's measured crossover: QGEMV_MAX_ROWS,
  more for fp8 when N <= 1.5 K, QGEMV_MAX_ROWS_DEEP) take the decode GEMV
  (op gemv_<format>: the native kernel, or its Triton twin under the deterministic mode or
  without the native extension), more rows the mixed-input GEMM (op qgemm_<format>, Triton:
  the weight dequantized in the mainloop, tensor-core products). Both give the reference's
  product within float32 accumulation: every weight value enters the product exactly and the
  float32 scales multiply float32 sums. A GGUF block format (q8_0 ... q6_k, q2_k, q3_k, kept
  as a GGUF file stores it) goes to the Triton kernels of pygpukit/ops/gguf.py instead, and
  there x may also be float32. The format w8a8 quantizes x per row to e4m3 as well and runs
  the FP8 x FP8 product (gp.quantize_fp8 + gp.matmul_fp8, cuBLASLt; under the deterministic
  mode, whose products must be batch invariant, the mixed-input GEMM's kernel on x's codes).
  On CUDA, from QDENSE_MIN_ROWS[format] rows on (prefill), an fp8 / int4 / nvfp4 weight is
  dequantized into x's dtype for the call (one rounding per weight value, a transient N x K
  array) and gp.linear runs the product, as for the GGUF formats; the deterministic mode, the
  CPU device (the NumPy reference) and devices the Triton kernel cannot serve keep the exact
  weight there too. An int4 or fp8 weight below QDENSE_FUSED_MAX_ROWS rows takes that same
  rounded weight through op qgemm_<format>_dense where it serves (CUTLASS's mixed-input GEMM on
  Hopper: the weight dequantized in the mainloop, no N x K array).

K alignment (16-byte weight rows): gemv K % 8 == 0; fp8 K % 16 == 0; int4/nvfp4 K % 32 == 0.
"""

from __future__ import annotations

import math
from typing import Any

from pygpukit import determinism
from pygpukit.array import GPUArray
from pygpukit.backends._support.weights import constant_weights
from pygpukit.ops import _checks as chk
from pygpukit.qweight import QuantizedWeight
from pygpukit.routing.backends import availability
from pygpukit.routing.crossovers import (
    DENSE_GEMV_MAX_K,
    DENSE_GEMV_MAX_ROWS,
    QDENSE_FUSED_MAX_ROWS,
    QDENSE_MIN_ROWS,
    QUANT_CAPABILITY,
    W8A8_MAX_ROWS,
    qgemv_max_rows,
)
from pygpukit.routing.dispatch import run
from pygpukit.routing.overrides import forced_backend, named_backend
from pygpukit.routing.select import serves

__all__ = [
    "gemv",
    "linear_quantized",
    "linear_silu_mul",
    "rmsnorm_linear",
    "GEMV_MAX_ROWS",
    "constant_weights",
]

GEMV_MAX_ROWS = 16
# The formats whose [Wg; Wu] linear_silu_mul gives the gated decode GEMV (op
# gemv_<format>_silu_mul) by default, where the module docstring says; the others take
# linear_quantized + silu_mul unless a route names the gated op. In isolated chains it won at
# some shapes and lost at others: H200, 2026-11-28, graph-replayed chains with the weight rotated
# out of L2 (benchmarks/tuning/gated_gemv_ab.py --rows 1), one launch / two, us, two rounds: 1B
# MLP (K2048, I8192) int4 13.78-13.93 / 10.88-10.95, fp8 13.14-13.17 / 14.52-14.60, nvfp4
# 12.61-12.62 / 13.24-13.26; 8B MLP (K4096, I14336) int4 24.76-24.82 / 27.04-27.06, fp8
# 39.56-39.87 / 34.73-34.81, nvfp4 31.60-31.61 / 30.05-30.09. The decode step decided (same
# day, benchmarks/tuning/decode_ab.py --quantize <format> --experiment quant-sites, the
# Llama-3.2-1B shape, a step inside the 32-step graph, two rounds): int4 640.3-640.8 us with the
# one launch against 651.0-651.1 with two, nvfp4 701.0-701.1 against 704.0-704.7 (0.4%, not
# taken), fp8 852.6-852.8 against 800.7-801.1. Measured at one row of x only (batch-1 decode;
# in the chains at 4 rows the 1B int4 one launch lost), so the default stops at
# QUANT_GATED_DEFAULT_MAX_ROWS.
QUANT_GATED_FORMATS = frozenset({"int4"})
QUANT_GATED_DEFAULT_MAX_ROWS = 1
# None (shipped): QUANT_GATED_FORMATS and QUANT_GATED_DEFAULT_MAX_ROWS decide; True / False:
# every format up to qgemv_max_rows / none (the A/B scripts' switch).
QUANT_GATED_GEMV: bool | None = None
# The formats whose rmsnorm_linear gives the RMSNorm form (op rmsnorm_gemv_<format>: the
# pre-norm block's norm and the decode GEMV after it in one launch) by default, at one row of x
# on CUDA outside the deterministic mode, where the native kernel serves; the others take
# gp.rmsnorm + gp.linear_quantized unless a route names the op. QUANT_NORM_GEMV None (shipped):
# QUANT_NORM_FORMATS, QUANT_NORM_MAX_K and QUANT_NORM_MAX_N decide; True / False: every format
# and size / none (the A/B scripts' switch).
QUANT_NORM_FORMATS = frozenset({"fp8", "int4", "nvfp4"})
# ... and in_features at most QUANT_NORM_MAX_K, out_features at most QUANT_NORM_MAX_N: every
# block of the kernel reads the whole row, its residual and the norm weight again (6 K bytes)
# and normalises it before its first product; what the saved launch buys back shrinks as K and
# the number of blocks grow. H200, 2026-11-28 (benchmarks/tuning/decode_ab.py --quantize
# <format> --experiment quant-norm, a step inside the 32-step graph, two rounds):
# - Llama-3.2-1B shape, the qkv product (K 2048, N 3072; its lm_head is tied and dense): int4
#   623.2-624.0 us read in against 637.2-637.5 apart, nvfp4 689.6-689.7 against 702.6-703.0,
#   fp8 772.8-772.9 against 801.0-801.1 (1.9-3.5% shorter);
# - Qwen3-8B shape, int4: the qkv product (K 4096, N 6144) read in 2457.9-2458.7 against
#   2445.2-2446.0 apart (0.5% longer); with the untied lm_head (N 151936, 4748 blocks) read in
#   too 2467.8 (two earlier rounds: 2461.5-2463.0 against 2440.1-2440.5).
# So the rule takes the measured win only; K between 2048 and 4096 was not measured.
QUANT_NORM_MAX_K = 2048
QUANT_NORM_MAX_N = 16384
QUANT_NORM_GEMV: bool | None = None
# The norm form keeps the row in shared memory (native/src/gemv/gemv.h, kGemvNormMaxK).
NORM_GEMV_MAX_K = 16384
_HALF = ("float16", "bfloat16")
# linear_quantized's two ops per format: the decode GEMV and the mixed-input GEMM.
_QUANT_OPS = {f: (f"gemv_{f}", f"qgemm_{f}") for f in ("fp8", "int4", "nvfp4")}


def _x_checks(op: str, x: Any, k: int, dtypes: tuple[str, ...] = _HALF) -> int:
    """x [..., K] of one of ``dtypes``; returns its number of rows."""
    chk.array(op, "x", x)
    if x.dtype.name not in dtypes:
        raise TypeError(f"{op}: x must be a {' or '.join(dtypes)} array, got {chk.desc(x)}")
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(
            f"{op}: x has {chk.desc(x)} but must be [..., {k}] (the weight's in_features)"
        )
    return math.prod(x.shape[:-1])


def _bias_checks(op: str, bias: Any, x: GPUArray, n: int) -> None:
    if bias is None:
        return
    chk.array(op, "bias", bias)
    if bias.dtype is not x.dtype:
        raise TypeError(f"{op}: bias has {chk.desc(bias)} but x has dtype {x.dtype.name}")
    if bias.shape != (n,):
        raise ValueError(f"{op}: bias has {chk.desc(bias)} but must have shape ({n},)")


def gemv(
    x: GPUArray, weight: GPUArray, bias: GPUArray | None = None, *, out: GPUArray | None = None
) -> GPUArray:
    """x @ weight^T + bias for at most 16 rows of x: x [..., K], weight [N, K] and bias [N] of
    one dtype (float16 or bfloat16), K % 8 == 0. Returns [..., N] (or out=)."""
    op = "gemv"
    chk.array(op, "weight", weight)
    if weight.ndim != 2:
        raise ValueError(
            f"{op}: weight must be 2-D [out_features, in_features], got {chk.desc(weight)}"
        )
    n, k = weight.shape
    rows = _x_checks(op, x, k)
    if weight.dtype is not x.dtype:
        raise TypeError(f"{op}: weight has {chk.desc(weight)} but x has dtype {x.dtype.name}")
    if rows > GEMV_MAX_ROWS:
        raise ValueError(
            f"{op}: x has {chk.desc(x)}, {rows} rows; the GEMV kernel serves at most "
            f"{GEMV_MAX_ROWS} (use gp.linear for more)"
        )
    if k == 0 or k % 8:
        raise ValueError(
            f"{op}: in_features K={k} must be a positive multiple of 8 (16-byte weight rows)"
        )
    _bias_checks(op, bias, x, n)
    chk.out_arg(op, out, (*x.shape[:-1], n), x.dtype)
    return run(op, (x, weight, bias), {}, out=out)


def decode_gemv(x: GPUArray, weight: GPUArray) -> bool:
    """Whether gp.linear / gp.linear_silu_mul hand x @ weight^T to the dense decode GEMV: at
    most DENSE_GEMV_MAX_ROWS rows, x and weight of one dtype (float16 or bfloat16), weight rows
    at unit stride, K % 8 == 0 and K <= DENSE_GEMV_MAX_K (its K tiles are unrolled), on CUDA
    with Triton available, outside the deterministic mode (there every row count takes the same
    fixed-tile GEMM), and unless a route (gp.route, ROUTE=) forces op linear: then gp.linear
    runs where the route says, at every row count."""
    k = x.shape[-1] if x.ndim else 0
    return (  # the row count first: every gp.linear call asks, prefill included
        math.prod(x.shape[:-1]) <= DENSE_GEMV_MAX_ROWS
        and x.device.type == "cuda"
        and x.dtype.name in _HALF
        and weight.dtype is x.dtype
        and weight.ndim == 2
        and weight.element_strides[-1] == 1
        and 0 < k <= DENSE_GEMV_MAX_K
        and k % 8 == 0
        and not determinism.is_deterministic()
        and forced_backend("linear")[0] is None
        and availability("triton")[0]
    )


def linear_silu_mul(
    x: GPUArray, w_gate_up: GPUArray | QuantizedWeight, *, out: GPUArray | None = None
) -> GPUArray:
    """silu(x @ w_gate_up[:I]^T) * (x @ w_gate_up[I:]^T): x [..., K], w_gate_up [2I, K] (the
    gate rows, then the up rows) of x's floating dtype, or a QuantizedWeight of that shape.
    Returns [..., I] (or out=)."""
    op = "linear_silu_mul"
    if isinstance(w_gate_up, QuantizedWeight):
        return _quantized_silu_mul(x, w_gate_up, out)
    chk.array(op, "x", x)
    chk.array(op, "w_gate_up", w_gate_up)
    chk.floating(op, "x", x)
    if w_gate_up.ndim != 2 or w_gate_up.shape[0] % 2 or x.ndim < 1:
        raise ValueError(
            f"{op}: w_gate_up must be [2 * intermediate, in_features] (gate rows, then up rows) "
            f"and x [..., in_features]; got w_gate_up {chk.desc(w_gate_up)}, x {chk.desc(x)}"
        )
    i2, k = w_gate_up.shape
    if x.shape[-1] != k:
        raise ValueError(
            f"{op}: x has {chk.desc(x)} but must be [..., {k}] (w_gate_up's in_features)"
        )
    if w_gate_up.dtype is not x.dtype:
        raise TypeError(f"{op}: w_gate_up has {chk.desc(w_gate_up)} but x has dtype {x.dtype.name}")
    if x.device != w_gate_up.device:
        raise ValueError(f"{op}: x is on {x.device} but w_gate_up is on {w_gate_up.device}")
    chk.out_arg(op, out, (*x.shape[:-1], i2 // 2), x.dtype)
    if decode_gemv(x, w_gate_up) or named_backend(op) is not None:
        # The fused GEMV (a route naming op linear_silu_mul takes it at any row count; a "*"
        # rule does not, or every prefill would need the fused op's backend).
        return run(op, (x, w_gate_up), {}, out=out)
    from pygpukit.ops.activation import silu_mul
    from pygpukit.ops.matmul import linear

    h = linear(x, w_gate_up)
    return silu_mul(h[..., : i2 // 2], h[..., i2 // 2 :], out=out)


def _format_params(qw: QuantizedWeight) -> dict[str, Any]:
    """The keyword parameters an fp8 / int4 / nvfp4 product op takes for qw's scales."""
    if qw.format == "fp8":
        return {"block": qw.block}
    if qw.format == "int4":
        return {"group": qw.block}
    return {"global_scale": qw.global_scale}


def _quantized_silu_mul(x: GPUArray, qw: QuantizedWeight, out: GPUArray | None) -> GPUArray:
    """linear_silu_mul with a quantized [Wg; Wu] (module docstring)."""
    op = "linear_silu_mul"
    i2, k = qw.shape
    if i2 % 2:
        raise ValueError(
            f"{op}: w_gate_up must hold 2 * intermediate rows (gate rows, then up rows), "
            f"got a QuantizedWeight of shape {qw.shape}"
        )
    rows = _x_checks(op, x, k, (*_HALF, "float32") if qw.is_gguf else _HALF)
    if x.device != qw.device:
        raise ValueError(f"{op}: x is on {x.device} but w_gate_up is on {qw.device}")
    chk.out_arg(op, out, (*x.shape[:-1], i2 // 2), x.dtype)
    fmt = qw.format
    if fmt in _QUANT_OPS:
        fused = f"gemv_{fmt}_silu_mul"
        if QUANT_GATED_GEMV is None:  # the shipped rule
            gated, max_rows = fmt in QUANT_GATED_FORMATS, QUANT_GATED_DEFAULT_MAX_ROWS
        else:
            gated, max_rows = QUANT_GATED_GEMV, qgemv_max_rows(fmt, i2, k)
        decode = (
            gated
            and x.device.type == "cuda"
            and rows <= max_rows
            and not determinism.is_deterministic()
        )
        if decode or named_backend(fused) is not None:
            return run(fused, (x, qw.data, qw.scales), _format_params(qw), out=out)
    from pygpukit.ops.activation import silu_mul

    h = linear_quantized(x, qw)
    return silu_mul(h[..., : i2 // 2], h[..., i2 // 2 :], out=out)


def rmsnorm_linear(
    x: GPUArray,
    norm_weight: GPUArray,
    weight: GPUArray | QuantizedWeight,
    bias: GPUArray | None = None,
    *,
    eps: float = 1e-6,
    residual: GPUArray | None = None,
    out: GPUArray | None = None,
) -> Any:
    """rmsnorm(h, norm_weight, eps) @ weight^T + bias with h = x (+ residual): x [..., K],
    norm_weight [K], weight [N, K] of x's floating dtype (or a QuantizedWeight of that shape),
    bias [N]. Returns y [..., N], or (y, h) when residual is given (then out= is not accepted,
    as in gp.rmsnorm)."""
    from pygpukit.ops.norm import rms_args

    op = "rmsnorm_linear"
    e = rms_args(op, x, norm_weight, eps, residual, out, "norm_weight")
    if isinstance(weight, QuantizedWeight):
        return _quantized_rmsnorm_linear(x, norm_weight, weight, bias, e, residual, out)
    chk.array(op, "weight", weight)
    if weight.ndim != 2:
        raise ValueError(
            f"{op}: weight must be 2-D [out_features, in_features], got {chk.desc(weight)}"
        )
    n, k = weight.shape
    if x.shape[-1] != k:
        raise ValueError(f"{op}: x has {chk.desc(x)} but must be [..., {k}] (weight's in_features)")
    if weight.dtype is not x.dtype:
        raise TypeError(f"{op}: weight has {chk.desc(weight)} but x has dtype {x.dtype.name}")
    _bias_checks(op, bias, x, n)
    for name, a in (("norm_weight", norm_weight), ("weight", weight), ("residual", residual)):
        if a is not None and a.device != x.device:
            raise ValueError(f"{op}: x is on {x.device} but {name} is on {a.device}")
    chk.out_arg(op, out, (*x.shape[:-1], n), x.dtype)
    if (decode_gemv(x, weight) and norm_weight.dtype is x.dtype) or named_backend(op) is not None:
        # The fused kernel (a route naming op rmsnorm_linear takes it at any row count).
        return run(op, (x, norm_weight, weight, bias, residual), {"eps": e}, out=out)
    from pygpukit.ops.matmul import linear
    from pygpukit.ops.norm import rmsnorm

    if residual is None:
        return linear(rmsnorm(x, norm_weight, e), weight, bias, out=out)
    nx, h = rmsnorm(x, norm_weight, e, residual=residual)
    return linear(nx, weight, bias), h


def _quantized_rmsnorm_linear(
    x: GPUArray,
    norm_weight: GPUArray,
    qw: QuantizedWeight,
    bias: GPUArray | None,
    eps: float,
    residual: GPUArray | None,
    out: GPUArray | None,
) -> Any:
    """rmsnorm_linear with a quantized weight (module docstring): one launch (op
    rmsnorm_gemv_<format>) where the shipped rule or a route says, else gp.rmsnorm then
    gp.linear_quantized."""
    op = "rmsnorm_linear"
    n, k = qw.shape
    rows = _x_checks(op, x, k, (*_HALF, "float32") if qw.is_gguf else _HALF)
    _bias_checks(op, bias, x, n)
    for name, a in (("norm_weight", norm_weight), ("weight", qw), ("residual", residual)):
        if a is not None and a.device != x.device:
            raise ValueError(f"{op}: x is on {x.device} but {name} is on {a.device}")
    chk.out_arg(op, out, (*x.shape[:-1], n), x.dtype)
    fmt = qw.format
    if fmt in _QUANT_OPS:
        fused = f"rmsnorm_gemv_{fmt}"
        inputs = (x, norm_weight, qw.data, qw.scales, bias, residual)
        params = {"eps": eps, **_format_params(qw)}
        if QUANT_NORM_GEMV is None:  # the shipped rule
            wanted = fmt in QUANT_NORM_FORMATS and k <= QUANT_NORM_MAX_K and n <= QUANT_NORM_MAX_N
        else:
            wanted = QUANT_NORM_GEMV
        decode = (
            wanted
            and rows == 1
            and x.device.type == "cuda"
            and norm_weight.dtype is x.dtype
            and k <= NORM_GEMV_MAX_K
            and not determinism.is_deterministic()
            and serves(fused, x.device, inputs, params)
        )
        if decode or named_backend(fused) is not None:
            return run(fused, inputs, params, out=out)
    from pygpukit.ops.norm import rmsnorm

    if residual is None:
        return linear_quantized(rmsnorm(x, norm_weight, eps), qw, bias, out=out)
    nx, h = rmsnorm(x, norm_weight, eps, residual=residual)
    return linear_quantized(nx, qw, bias), h


def linear_quantized(
    x: GPUArray, qw: QuantizedWeight, bias: GPUArray | None = None, *, out: GPUArray | None = None
) -> GPUArray:
    """x @ dequant(qw)^T + bias: x [..., K] float16/bfloat16 (also float32 for a GGUF format),
    qw a QuantizedWeight of shape [N, K] (gp.quantize_weight, or a GGUF file's blocks), bias [N]
    of x's dtype. Returns [..., N] in x's dtype (or out=)."""
    op = "linear_quantized"
    if not isinstance(qw, QuantizedWeight):
        raise TypeError(
            f"{op}: qw must be a QuantizedWeight (from gp.quantize_weight), got {type(qw).__name__}"
        )
    n, k = qw.shape
    rows = _x_checks(op, x, k, (*_HALF, "float32") if qw.is_gguf else _HALF)
    _bias_checks(op, bias, x, n)
    chk.out_arg(op, out, (*x.shape[:-1], n), x.dtype)
    if x.device != qw.device:
        raise ValueError(f"{op}: x is on {x.device} but qw is on {qw.device}")
    if qw.is_gguf:
        from pygpukit.ops.gguf import linear_gguf

        return linear_gguf(x, qw, bias, out)
    if qw.format == "w8a8":
        return _w8a8(x, qw, bias, out)
    fmt = qw.format
    inputs = (x, qw.data, qw.scales, bias)
    gemv_op, gemm_op = _QUANT_OPS[fmt]
    params = _format_params(qw)
    if rows >= QDENSE_MIN_ROWS[fmt] and _dense_path(fmt, x):
        if rows < QDENSE_FUSED_MAX_ROWS.get(fmt, 0) and serves(
            f"{gemm_op}_dense", x.device, inputs, params
        ):
            return run(f"{gemm_op}_dense", inputs, params, out=out)
        w = run(
            "dequantize_weight",
            (qw.data, qw.scales),
            {"fmt": fmt, "block": qw.block, "global_scale": qw.global_scale,
             "out_dtype": x.dtype.np_dtype},
        )  # fmt: skip
        from pygpukit.ops.matmul import linear

        return linear(x, w, bias, out=out)
    name = gemv_op if rows <= qgemv_max_rows(fmt, n, k) else gemm_op
    return run(name, inputs, params, out=out)


def _dense_path(fmt: str, x: GPUArray) -> bool:
    """Whether a many-row product may expand the weight (dequantize_weight + gp.linear): on CUDA
    only (the NumPy reference keeps the exact weight at every row count), outside the
    deterministic mode, where the Triton dequantize kernel runs (the format's capability)."""
    dev = x.device
    if dev.type != "cuda" or determinism.is_deterministic():
        return False
    if not availability("triton")[0]:
        return False
    props = dev.properties
    return (props["major"], props["minor"]) >= QUANT_CAPABILITY[fmt]


def _w8a8(
    x: GPUArray, qw: QuantizedWeight, bias: GPUArray | None, out: GPUArray | None
) -> GPUArray:
    """x quantized per row to e4m3 (gp.quantize_fp8, amax / 448 a row), then the FP8 x FP8
    product with the weight's per-channel scales: float32 accumulation of the exact code
    products, both scales and the bias on the float32 sum, one rounding to x's dtype. Up to
    W8A8_MAX_ROWS rows (and under the deterministic mode) op qgemm_w8a8 (the mixed-input
    GEMM's kernel), more rows gp.matmul_fp8 (cuBLASLt). Routed ops only, no host sync."""
    from pygpukit.creation import empty
    from pygpukit.ops.quant import matmul_fp8, quantize_fp8

    n, k = qw.shape
    lead = x.shape[:-1]
    rows = math.prod(lead)
    if rows == 0:
        return out if out is not None else empty((*lead, n), x.dtype, x.device)
    q, sa = quantize_fp8(x, "float8_e4m3fn", granularity="row")  # any strides; q contiguous
    q, sa = q.reshape(rows, k), sa.reshape(rows, 1)
    flat = out.reshape(rows, n) if out is not None and out.is_contiguous() else None
    assert qw.scales is not None
    if rows <= W8A8_MAX_ROWS or determinism.is_deterministic():
        inputs = (q, sa, qw.data, qw.scales, bias)
        y = run("qgemm_w8a8", inputs, {"out_dtype": x.dtype.np_dtype}, out=flat)
    else:
        y = matmul_fp8(
            q, qw.data, scale_a=sa, scale_b=qw.scales, out_dtype=x.dtype, bias=bias, out=flat
        )
    if out is None:
        return y.reshape(*lead, n)  # type: ignore[no-any-return]
    if flat is None:  # a strided out= (a column slice, ...): one copy into it
        out[...] = y.reshape(*lead, n)
    return out
