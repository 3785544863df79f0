"""LayerNorm and RMSNorm over the last axis.

layernorm: y = (x - mean) / sqrt(var + eps) * weight + bias (biased variance, Ba et al. 2016).
rmsnorm: y = x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019). Statistics and the
weight multiply run in float32 (float64 for float64); the result rounds once to x's dtype.
rmsnorm(x, weight, residual=r) is the fused add + norm of a pre-norm block: h = x + r (stored in
x's dtype), y = rmsnorm(h); it returns (y, h).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["layernorm", "rmsnorm"]


def _vector(op: str, name: str, v: GPUArray, x: GPUArray) -> None:
    chk.array(op, name, v)
    chk.floating(op, name, v)
    if v.shape != (x.shape[-1],):
        raise ValueError(
            f"{op}: {name} has shape {v.shape} but x's last dim is {x.shape[-1]} "
            f"(x has {chk.desc(x)})"
        )


def _x(op: str, x: GPUArray) -> None:
    chk.array(op, "x", x)
    chk.floating(op, "x", x)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"{op}: x must have a non-empty last dim, got {chk.desc(x)}")


def _plain(x: Any, weight: Any, eps: Any) -> bool:
    """The common call's arguments checked in one expression (float arrays, a weight of x's last
    dim, a float eps >= 0): _x, _vector and eps_arg reach the same verdict, but the decode-size call
    is host-bound and they cost about 1 us more (0.5 us on a GPU host). False sends the call
    through them, and to their error messages."""
    return (
        type(x) is GPUArray
        and type(weight) is GPUArray
        and type(eps) is float
        and eps >= 0.0
        and x._dtype.kind == "f"
        and weight._dtype.kind == "f"
        and len(x._shape) > 0
        and x._shape[-1] != 0
        and weight._shape == (x._shape[-1],)
    )


def eps_arg(op: str, eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"{op}: eps must be a non-negative number, got {eps!r}")
    return float(eps)


def layernorm(
    x: GPUArray,
    weight: GPUArray | None,
    bias: GPUArray | None = None,
    eps: float = 1e-5,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """LayerNorm over the last axis; weight and bias are [x.shape[-1]] (either may be None)."""
    op = "layernorm"
    _x(op, x)
    if weight is not None:
        _vector(op, "weight", weight, x)
    if bias is not None:
        _vector(op, "bias", bias, x)
    e = eps_arg(op, eps)
    chk.out_arg(op, out, x.shape, x.dtype)
    return run(op, (x, weight, bias), {"eps": e}, out=out)


def rmsnorm(
    x: GPUArray,
    weight: GPUArray,
    eps: float = 1e-6,
    residual: GPUArray | None = None,
    *,
    out: GPUArray | None = None,
) -> Any:
    """RMSNorm over the last axis. Returns y, or (y, h) with h = x + residual when residual is
    given (then out= is not accepted: the fused form returns two fresh arrays)."""
    if out is None and _plain(x, weight, eps):
        if residual is None:
            return run("rmsnorm", (x, weight), {"eps": eps})
        r = residual
        if type(r) is GPUArray and r._shape == x._shape and r._dtype is x._dtype:
            return run("rmsnorm", (x, weight, r), {"eps": eps})
    op = "rmsnorm"
    e = rms_args(op, x, weight, eps, residual, out, "weight")
    if residual is not None:
        return run(op, (x, weight, residual), {"eps": e})
    chk.out_arg(op, out, x.shape, x.dtype)
    return run(op, (x, weight), {"eps": e}, out=out)


def rms_args(
    op: str,
    x: Any,
    weight: Any,
    eps: Any,
    residual: Any,
    out: GPUArray | None,
    name: str,
) -> float:
    """The checks of an RMSNorm's arguments (gp.rmsnorm, gp.rmsnorm_linear): x, its weight
    (called ``name``), eps, a residual of x's shape and dtype, no out= beside a residual (two
    results). Returns eps as a float."""
    _x(op, x)
    _vector(op, name, weight, x)
    e = eps_arg(op, eps)
    if residual is not None:
        chk.array(op, "residual", residual)
        if residual.shape != x.shape or residual.dtype is not x.dtype:
            raise ValueError(
                f"{op}: residual has {chk.desc(residual)} but must match x ({chk.desc(x)})"
            )
        if out is not None:
            raise ValueError(f"{op}: out= is not supported with residual= (two results)")
    return e
