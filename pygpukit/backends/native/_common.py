"""Argument plumbing of the native kernel adapters that only the extension needs: the raw
stream handle, operands converted to the dtype a launch reads, and operands made 16-byte
aligned for kernels that read them with 16-byte loads (or TMA)."""

from __future__ import annotations

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import HALF
from pygpukit.backends._support.rows import as_rows
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, uint8

__all__ = ["aligned", "aligned_rows", "served_as", "stream_of"]


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


def aligned(a: GPUArray) -> GPUArray:
    """a itself when contiguous and 16-byte aligned, else an aligned contiguous copy (a fresh
    pool block)."""
    if a.is_contiguous() and a.data_ptr() % 16 == 0:
        return a
    return a.copy()


def scratch(nbytes: int, like: GPUArray) -> tuple[GPUArray, int]:
    """A pool block of at least ``nbytes`` on ``like``'s device and the 256-byte aligned address
    in it where the extension's scratch starts (its pieces sit at 256-byte offsets, and CUTLASS
    places tensor maps at 64-byte ones). Keep the array alive until the launch is enqueued."""
    block = empty((int(nbytes) + 256,), uint8, like._device)
    return block, -(-block.data_ptr() // 256) * 256


def aligned_rows(x: GPUArray) -> tuple[GPUArray, int, int, int]:
    """x (or an aligned contiguous copy) as rows: (x, rows, k, row stride in elements), the
    base and (with several rows) every row 16-byte aligned."""
    x, rows, k, sx = as_rows(x)
    if x.data_ptr() % 16 or (rows > 1 and (sx * x.itemsize) % 16):
        x = x.copy()  # a fresh pool block: aligned and contiguous
        sx = k
    return x, rows, k, sx
