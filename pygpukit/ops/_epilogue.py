"""Finishing a product a backend handed back ``Unfinished`` (pygpukit/backends/_support/output.py):
the epilogue its kernels could not fuse, done here with the routed ops. Every routed product
(matmul, linear, linear_bias_gelu, matmul_fp8) passes its result through ``finish``."""

from __future__ import annotations

from typing import Any

from pygpukit import _memory
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import Unfinished

__all__ = ["finish"]


def finish(res: Any, out: GPUArray | None) -> GPUArray:
    """res itself, or an Unfinished result completed (bias, activation, cast) into out."""
    if not isinstance(res, Unfinished):
        return res  # type: ignore[no-any-return]
    from pygpukit.ops.activation import gelu, relu, silu
    from pygpukit.ops.elementwise import add, cast

    y, dt = res.y, res.dtype
    if res.bias is not None:
        y = add(y, res.bias)
    act = res.activation
    if act is not None:
        dest = out if (out is not None and y.dtype is dt) else None
        if act == "relu":
            y = relu(y, out=dest)
        elif act == "silu":
            y = silu(y, out=dest)
        elif act in ("gelu", "gelu_tanh"):
            y = gelu(y, "tanh" if act == "gelu_tanh" else "none", out=dest)
        else:
            raise ValueError(f"linear: unknown activation {act!r}")
    if y.dtype is not dt:
        y = cast(y, dt, out=out)
    if out is None or y is out:
        return y
    _memory.copy_into(out, y)
    return out
