"""Argument plumbing shared by the native kernel adapters: the stream, row views, outputs."""

from __future__ import annotations

from typing import Any

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty

__all__ = ["stream_of", "rows_of", "as_rows", "target", "deliver"]


def stream_of(x: GPUArray) -> int:
    """pygpukit's current stream on x's device, as the raw handle the extension takes."""
    handle: int = runtime.current_stream(x._device).handle
    return handle


def rows_of(x: GPUArray) -> tuple[int, int, int] | None:
    """(rows, n, row_stride) when x reads as rows of its last dim, the last dim contiguous and
    the leading dims stepping with one stride (in elements); None otherwise."""
    n = x._shape[-1] if x._shape else 1
    rows = x.size // n if n else 0
    if x.ndim <= 1:  # one row: readable in place only when it is contiguous
        return (rows, n, n) if n <= 1 or x._estrides[-1] == 1 else None
    if n > 1 and x._estrides[-1] != 1:
        return None
    lead = [(d, s) for d, s in zip(x._shape[:-1], x._estrides[:-1], strict=True) if d != 1]
    if not lead:
        return rows, n, n
    step = lead[-1][1]
    acc = step
    for d, s in reversed(lead):
        if s != acc:
            return None
        acc = s * d
    if step < n or step <= 0:
        return None
    return rows, n, step


def as_rows(x: GPUArray) -> tuple[GPUArray, int, int, int]:
    """x (or its contiguous copy, made by the routed copy op) with its (rows, n, row_stride)."""
    got = rows_of(x)
    if got is None:
        x = x.contiguous()
        got = rows_of(x)
        assert got is not None
    return (x, *got)


def target(out: GPUArray | None, shape: tuple[int, ...], dt: Any, like: GPUArray) -> GPUArray:
    """out when it is contiguous, else a fresh contiguous array (deliver copies it into out)."""
    if out is not None and out.is_contiguous():
        return out
    return empty(shape, dt, like._device)


def deliver(y: GPUArray, out: GPUArray | None) -> GPUArray:
    """y, or out after copying y into it (out= of a non-contiguous layout)."""
    if out is None or y is out:
        return y
    out[...] = y
    return out
