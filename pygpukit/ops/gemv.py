"""Decode GEMV and quantized-weight linear: gemv, linear_quantized.

Both compute y = x @ W^T + bias with W stored [N, K] (torch.nn.Linear layout) for x of dtype
float16 or bfloat16, a float32 accumulator and one rounding to x's dtype; the NumPy backend is
the float64 product of x with the (dequantized) weight, rounded once.

- ``gemv(x, weight, bias)``: a dense weight of x's dtype, for at most 16 rows of x (the leading
  dims of x multiplied: decode, speculative verification). Larger products belong to
  ``gp.linear`` (cuBLASLt); linear itself can hand small-M products to this kernel through the
  measured crossover table in pygpukit/backends/native/matmul.py.
- ``linear_quantized(x, qw, bias)``: W quantized once by ``gp.quantize_weight`` (fp8, int4 or
  nvfp4, pygpukit/qweight.py), dequantized in registers on every call. A GGUF block format
  (q8_0 ... q6_k, q2_k, q3_k, kept as a GGUF file stores it) goes to the Triton kernels of
  pygpukit/ops/gguf.py instead, and there x may also be float32. Any number of rows; the
  kernel is built for decode (W is re-read once per 16 rows of x, so for long prefills
  dequantizing once to bf16 and calling gp.linear is faster).

K alignment (16-byte weight rows): gemv K % 8 == 0; fp8 K % 16 == 0; int4/nvfp4 K % 32 == 0.
"""

from __future__ import annotations

import math
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.qweight import QuantizedWeight
from pygpukit.routing.dispatch import run

__all__ = ["gemv", "linear_quantized", "GEMV_MAX_ROWS"]

GEMV_MAX_ROWS = 16
_HALF = ("float16", "bfloat16")


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
    _x_checks(op, x, k, (*_HALF, "float32") if qw.is_gguf else _HALF)
    _bias_checks(op, bias, x, n)
    chk.out_arg(op, out, (*x.shape[:-1], n), x.dtype)
    if x.device != qw.device:
        raise ValueError(f"{op}: x is on {x.device} but qw is on {qw.device}")
    if qw.is_gguf:
        from pygpukit.ops.gguf import linear_gguf

        return linear_gguf(x, qw, bias, out)
    inputs = (x, qw.data, qw.scales, bias)
    if qw.format == "fp8":
        return run("gemv_fp8", inputs, {"block": qw.block}, out=out)
    if qw.format == "int4":
        return run("gemv_int4", inputs, {"group": qw.block}, out=out)
    params = {"global_scale": qw.global_scale}
    return run("gemv_nvfp4", inputs, params, out=out)
