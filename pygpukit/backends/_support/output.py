"""Where a kernel writes its result, and how that result reaches ``out``.

One policy for every kernel adapter: the ops layer has checked ``out`` (shape, dtype, device);
a kernel writes into ``out`` directly when it can address ``out``'s layout (any layout for
kernels that take element strides, a contiguous one for the others), otherwise into a fresh
contiguous array that ``deliver`` then copies into ``out`` (one extra pass, only for such outs).
"""

from __future__ import annotations

from typing import NamedTuple

from pygpukit import _memory
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType

__all__ = ["Unfinished", "deliver", "target"]


class Unfinished(NamedTuple):
    """A product whose epilogue a backend could not fuse, handed back to the ops layer, which
    finishes it with the routed ops (pygpukit/ops/_epilogue.py): ``y`` + ``bias`` (when not None),
    then ``activation`` (when not None), then a cast to ``dtype``, delivered into ``out``.

    This keeps composition where it belongs: a backend computes what its kernels can (cuBLASLt
    fuses bias, ReLU and tanh-GELU), and never calls back into the routed public ops."""

    y: GPUArray
    bias: GPUArray | None
    activation: str | None
    dtype: DataType


def target(
    out: GPUArray | None,
    shape: tuple[int, ...],
    dt: DataType,
    like: GPUArray,
    *,
    strided: bool = False,
    align: int = 1,
) -> GPUArray:
    """``out`` when the kernel can write it (``strided``: it takes out's element strides; else
    out must be contiguous; ``align``: its base must be a multiple of that many bytes, e.g. 16
    for a TMA store), otherwise a fresh contiguous array on ``like``'s device."""
    if (
        out is not None
        and (strided or out.is_contiguous())
        and (align == 1 or out.data_ptr() % align == 0)
    ):
        return out
    return empty(shape, dt, like._device)


def deliver(y: GPUArray, out: GPUArray | None) -> GPUArray:
    """y, or out after copying y into it (an out= the kernel could not write in place)."""
    if out is None or y is out:
        return y
    _memory.copy_into(out, y)
    return out
