"""Argument plumbing shared by the native kernel adapters: the stream, row views, outputs."""

from __future__ import annotations

from typing import Any

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends.native_kernels._rowio import deliver, row_stride
from pygpukit.creation import empty

__all__ = ["stream_of", "rows_of", "as_rows", "target", "deliver"]


def stream_of(x: GPUArray) -> int:
    """pygpukit's current stream on x's device, as the raw handle the extension takes."""
    handle: int = runtime.current_stream(x._device).handle
    return handle


def rows_of(x: GPUArray) -> tuple[int, int, int] | None:
    """(rows, n, row_stride) when x reads as distinct rows of its last dim (last dim contiguous,
    leading dims stepping with one stride, rows that neither overlap nor repeat); None
    otherwise. The scan itself is _rowio.row_stride, shared with the row kernels' adapters."""
    s = row_stride(x)
    if s is None:
        return None
    n = x._shape[-1] if x._shape else 1
    rows = x.size // n if n else 0
    if any(d != 1 for d in x._shape[:-1]) and (s < n or s <= 0):
        return None
    return rows, n, s


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
