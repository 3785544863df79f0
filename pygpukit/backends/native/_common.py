"""Argument plumbing of the native kernel adapters that only the extension needs: the raw
stream handle, and operands converted to the dtype a launch reads."""

from __future__ import annotations

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import HALF
from pygpukit.dtypes import DataType

__all__ = ["served_as", "stream_of"]


def stream_of(x: GPUArray) -> int:
    """pygpukit's current stream on x's device, as the raw handle the extension takes."""
    handle: int = runtime.current_stream(x._device).handle
    return handle


def served_as(op: str, x: GPUArray, rd: DataType) -> GPUArray:
    """x as an operand of a kernel that reads and writes ``rd``.

    x itself when it is of dtype rd. Otherwise x converted to rd (``astype``), which is exactly
    the conversion the Triton kernel makes in registers when rd is its own compute type
    (float32, float64, the integers): same values, one extra pass, only for mixed-dtype calls.
    A float16/bfloat16 result from another input dtype would round the input before computing,
    so it is refused (the ops layer never asks for it: half results come from half inputs).
    """
    if x._dtype is rd:
        return x
    if rd.name in HALF or rd.kind not in ("f", "i", "u"):
        raise TypeError(
            f"{op}: the native kernel computes a {rd.name} result from {rd.name} inputs only, "
            f"got {x._dtype.name}"
        )
    return x.astype(rd)
