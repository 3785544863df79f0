"""Softmax along an axis, with optional logit scale and causal mask.

softmax(scale * x) computed max-subtracted in float32 (float64 for float64), rounded once.
causal=True masks the last two axes [..., Sq, Sk] so that query i sees keys j <= i + Sk - Sq
(aligned to the end of the key sequence, as FlashAttention-2 does); a row that sees no key is
all zeros rather than NaN.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["softmax"]


def softmax(
    x: GPUArray,
    axis: int = -1,
    scale: float | None = None,
    causal: bool = False,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """softmax(scale * x) along `axis` (default the last)."""
    op = "softmax"
    chk.array(op, "x", x)
    chk.floating(op, "x", x)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dim, got {chk.desc(x)}")
    ax = chk.axis_arg(op, axis, x.ndim)
    chk.scale_arg(op, scale)
    if causal:
        if x.ndim < 2:
            raise ValueError(
                f"{op}: causal=True needs x with >= 2 dims [..., Sq, Sk], got {chk.desc(x)}"
            )
        if ax != x.ndim - 1:
            raise ValueError(f"{op}: causal=True needs axis=-1 (the key axis), got axis={axis}")
    chk.out_arg(op, out, x.shape, x.dtype)
    params = {"axis": ax, "scale": None if scale is None else float(scale), "causal": bool(causal)}
    return run(op, (x,), params, out=out)
