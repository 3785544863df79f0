"""Activations: sigmoid, relu, silu, gelu, softplus, and the gated silu_mul / gelu_mul (SwiGLU,
GeGLU).

Formulas and numerics are those of pygpukit/backends/cpu/activation.py: gelu is
0.5 x (1 + erf(x / sqrt 2)) (approximate="none") or the tanh form of Hendrycks & Gimpel
(approximate="tanh"); silu(x) = x sigmoid(x); softplus(x) = log(1 + exp(x)); silu_mul(gate, up) =
silu(gate) * up rounded once.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.ops.unary import float_result
from pygpukit.routing.dispatch import run

__all__ = ["sigmoid", "relu", "silu", "gelu", "softplus", "silu_mul", "gelu_mul"]

_APPROX = ("none", "tanh")


def _float_valued(op: str, x: GPUArray, out: GPUArray | None, **params: object) -> GPUArray:
    chk.array(op, "x", x)
    chk.computable(op, "x", x)
    rd = float_result(x)
    chk.out_arg(op, out, x.shape, rd)
    params["out_dtype"] = rd.np_dtype
    return run(op, (x,), params, out=out)


def sigmoid(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """1 / (1 + exp(-x)), overflow-free."""
    return _float_valued("sigmoid", x, out)


def relu(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """max(x, 0); integer arrays stay integer; NaN stays NaN."""
    chk.array("relu", "x", x)
    chk.computable("relu", "x", x, allow_bool=False)
    chk.out_arg("relu", out, x.shape, x.dtype)
    return run("relu", (x,), {}, out=out)


def silu(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """x * sigmoid(x) (swish)."""
    return _float_valued("silu", x, out)


def softplus(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)): exact for every x (no
    overflow, no threshold), as jax.nn.softplus and torch.nn.functional.softplus with beta=1
    up to its threshold=20 linear cut-off. Integer inputs give float32."""
    return _float_valued("softplus", x, out)


def gelu(x: GPUArray, approximate: str = "none", *, out: GPUArray | None = None) -> GPUArray:
    """GELU: exact erf form (approximate="none", the default) or the tanh form."""
    chk.choice("gelu", "approximate", approximate, _APPROX)
    return _float_valued("gelu", x, out, approximate=approximate)


def _gated(
    op: str, gate: GPUArray, up: GPUArray, out: GPUArray | None, **params: object
) -> GPUArray:
    chk.array(op, "gate", gate)
    chk.array(op, "up", up)
    chk.floating(op, "gate", gate)
    chk.floating(op, "up", up)
    if gate.shape != up.shape:
        raise ValueError(
            f"{op}: gate has {chk.desc(gate)} but up has {chk.desc(up)}; shapes must match"
        )
    rd = chk.promote(op, gate, up, ("gate", "up"))
    chk.out_arg(op, out, gate.shape, rd)
    params["out_dtype"] = rd.np_dtype
    return run(op, (gate, up), params, out=out)


def silu_mul(gate: GPUArray, up: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """silu(gate) * up (the SwiGLU MLP of Llama/Qwen), one rounding."""
    return _gated("silu_mul", gate, up, out)


def gelu_mul(
    gate: GPUArray, up: GPUArray, approximate: str = "none", *, out: GPUArray | None = None
) -> GPUArray:
    """gelu(gate) * up (GeGLU, Gemma-style MLP), one rounding."""
    chk.choice("gelu_mul", "approximate", approximate, _APPROX)
    return _gated("gelu_mul", gate, up, out, approximate=approximate)
