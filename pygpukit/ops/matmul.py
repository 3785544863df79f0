"""Matrix products: matmul, transpose, linear, linear_bias_gelu.

matmul follows np.matmul / torch.matmul: 1-D operands act as a row (left) or column (right)
vector, N-D operands are stacks of matrices whose leading dims broadcast. Half-precision inputs
multiply with a float32 accumulator and round once; fp32 is exact fp32 (TF32 is opt-in, see
docs/api-0.2.md). linear(x, weight, bias) = x @ weight^T + bias with weight stored
[out_features, in_features] (torch.nn.Linear layout); bias and activation are applied before the
single rounding, as a GEMM epilogue does. linear hands one row of float16/bfloat16 x (batch-1
decode) to the dense decode GEMV on CUDA (op linear_gemv; ``decode_gemv`` in
pygpukit/ops/gemv.py says when), outside the deterministic mode, whose products must not depend
on the number of rows, and unless a route forces op linear.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.ops._epilogue import finish
from pygpukit.ops.gemv import decode_gemv
from pygpukit.routing.dispatch import run

__all__ = ["matmul", "transpose", "linear", "linear_bias_gelu"]

_ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")


def _matmul_shape(a: GPUArray, b: GPUArray) -> tuple[int, ...]:
    if a.ndim == 0 or b.ndim == 0:
        bad, t = ("a", a) if a.ndim == 0 else ("b", b)
        raise ValueError(f"matmul: {bad} must have at least 1 dim, got {chk.desc(t)}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ValueError(
            f"matmul: a has {chk.desc(a)} and b has {chk.desc(b)}: a's last dim {k_a} must "
            f"equal b's {'only' if b.ndim == 1 else 'second-to-last'} dim {k_b}"
        )
    lead_a = a.shape[:-2] if a.ndim > 1 else ()
    lead_b = b.shape[:-2] if b.ndim > 1 else ()
    try:
        lead = tuple(np.broadcast_shapes(lead_a, lead_b))
    except ValueError:
        raise ValueError(
            f"matmul: batch dims of a {lead_a} and b {lead_b} do not broadcast "
            f"(a {chk.desc(a)}, b {chk.desc(b)})"
        ) from None
    m = (a.shape[-2],) if a.ndim > 1 else ()
    n = (b.shape[-1],) if b.ndim > 1 else ()
    return (*lead, *m, *n)


def matmul(a: GPUArray, b: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """a @ b with NumPy's matmul rules (2-D, batched N-D with broadcasting, 1-D vectors)."""
    chk.array("matmul", "a", a)
    chk.array("matmul", "b", b)
    chk.computable("matmul", "a", a, allow_bool=False)
    chk.computable("matmul", "b", b, allow_bool=False)
    shape = _matmul_shape(a, b)
    rd = chk.promote("matmul", a, b)
    chk.out_arg("matmul", out, shape, rd)
    return run("matmul", (a, b), {"out_dtype": rd.np_dtype}, out=out)


def transpose(x: GPUArray, *axes: Any) -> GPUArray:
    """A view with the axes reversed (no axes) or permuted; no data moves."""
    chk.array("transpose", "x", x)
    return x.transpose(*axes)


def _linear_checks(
    op: str, x: GPUArray, weight: GPUArray, bias: GPUArray | None
) -> tuple[tuple[int, ...], Any]:
    chk.array(op, "x", x)
    chk.array(op, "weight", weight)
    chk.floating(op, "x", x)
    chk.floating(op, "weight", weight)
    if x.ndim < 1:
        raise ValueError(f"{op}: x must be [..., in_features], got {chk.desc(x)}")
    if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(
            f"{op}: weight has shape {weight.shape} but must be [out_features, "
            f"{x.shape[-1]}] (x's last dim; weight is stored [out_features, in_features])"
        )
    if bias is not None:
        chk.array(op, "bias", bias)
        chk.floating(op, "bias", bias)
        if bias.shape != (weight.shape[0],):
            raise ValueError(
                f"{op}: bias has shape {bias.shape} but weight has {weight.shape[0]} out_features"
            )
    rd = chk.promote(op, x, weight, ("x", "weight"))
    return (*x.shape[:-1], weight.shape[0]), rd


def linear(
    x: GPUArray,
    weight: GPUArray,
    bias: GPUArray | None = None,
    activation: str | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """activation(x @ weight^T + bias); activation None, "relu", "gelu", "gelu_tanh" or "silu"."""
    chk.choice("linear", "activation", activation, _ACTIVATIONS)
    shape, rd = _linear_checks("linear", x, weight, bias)
    chk.out_arg("linear", out, shape, rd)
    if activation is None and decode_gemv(x, weight) and (bias is None or bias.dtype is x.dtype):
        # One row (batch-1 decode): the dense decode GEMV (pygpukit/ops/gemv.py decode_gemv).
        return run("linear_gemv", (x, weight, bias), {}, out=out)
    params = {"activation": activation, "out_dtype": rd.np_dtype}
    return finish(run("linear", (x, weight, bias), params, out=out), out)


def linear_bias_gelu(
    input: GPUArray,
    weight: GPUArray,
    bias: GPUArray,
    approximate: str = "none",
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """gelu(input @ weight^T + bias), weight [out_features, in_features] (0.2.x API)."""
    op = "linear_bias_gelu"
    chk.choice(op, "approximate", approximate, ("none", "tanh"))
    if bias is None:
        raise TypeError(f"{op}: bias must be a GPUArray, got None (use linear() without bias)")
    shape, rd = _linear_checks(op, input, weight, bias)
    chk.out_arg(op, out, shape, rd)
    params = {"approximate": approximate, "out_dtype": rd.np_dtype}
    return finish(run(op, (input, weight, bias), params, out=out), out)
