"""Operand plumbing of the native map engine (native/include/pygpukit_native/map.cuh), shared by
the elementwise, unary and copy adapters.

``launch`` turns an output GPUArray and up to three inputs (GPUArrays broadcastable to the
output, scalars, or None) into the extension's call: dims collapsed jointly over every operand
(pygpukit._layout.merge_dims: size-1 dims dropped, jointly contiguous neighbours merged), element
strides with 0 along broadcast dims, raw pointers, scalar values. More than six collapsed dims
(rare: it needs broadcasting that interleaves with the layout) split along the leading dim.

``kernel_inputs`` brings the array inputs of an arithmetic op to the one storage dtype a launch
takes, mirroring what the Triton twins compute (each operand converted to the compute dtype of
the result, the arithmetic there, one rounding at the store):
- all of the result dtype ``rd``: read as they are;
- ``rd`` computes in itself (float32, float64, integers): the others are cast to ``rd`` first,
  which is that same conversion;
- ``rd`` float16/bfloat16 (computing in float32): inputs whose values ``rd`` holds exactly
  (bool, int8, uint8) are cast to ``rd``; otherwise every input is cast to float32 (exact for the
  float ones, the reference's rounding for wide integers) and the kernel rounds once to ``rd``.
The casts run as the routed ``cast`` op. Anything else (a bool result of non-bool inputs, which
only a direct call with out_dtype can ask for) returns None: the caller computes in the compute
dtype and casts the result.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends._support.collapse import broadcast_strides, plan_nd, split_leading
from pygpukit.backends._support.dtypes import HALF
from pygpukit.backends.native._common import stream_of
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["MAX_DIMS", "Scalar", "kernel_inputs", "launch", "scalar"]

MAX_DIMS = 6  # kMapDims in map_args.h
_EXACT_IN_HALF = frozenset({"bool", "int8", "uint8"})


class Scalar(NamedTuple):
    """A scalar input as the kernel takes it: f for floating compute types, i for integer ones
    (and for raw bits)."""

    f: float
    i: int


def scalar(value: Any, ct: str) -> Scalar:
    """value in compute dtype ct: a float (the kernel rounds it to float32 once, to nearest
    even, as Triton's scalar passing does) or an integer (truncated to ct's width in the
    kernel). NumPy scalars and 0-d arrays (what the op layer passes) are unwrapped."""
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.item()
    if ct in ("float32", "float64"):
        return Scalar(float(value), 0)
    return Scalar(0.0, int(value))


def kernel_inputs(arrays: list[GPUArray], rd: DataType) -> tuple[DataType, list[GPUArray]] | None:
    """(storage dtype of the launch, the arrays converted to it); see the module docstring."""
    if all(a._dtype is rd for a in arrays):
        return rd, arrays
    if rd.name in HALF:
        if all(a._dtype is rd or a._dtype.name in _EXACT_IN_HALF for a in arrays):
            return rd, [a if a._dtype is rd else a.astype(rd) for a in arrays]
        f32 = as_dtype("float32")
        return f32, [a if a._dtype is f32 else a.astype(f32) for a in arrays]
    if rd.name == "bool" or rd.is_fp8:
        return None
    return rd, [a if a._dtype is rd else a.astype(rd) for a in arrays]


def launch(
    fn: Any,
    op: str,
    in_dtype: str,
    out: GPUArray,
    operands: tuple[GPUArray | Scalar | None, ...],
    flags: int = 0,
) -> GPUArray:
    """out[...] = op(operands...) on the extension function fn (same dtype for every array
    input, ``in_dtype``; a where condition is input 0 and bool)."""
    shape = out._shape
    if out.size == 0:
        return out
    ptrs = [out.data_ptr()]
    strides: list[tuple[int, ...]] = [out._estrides]
    fs = [0.0]
    ints = [0]
    zeros = (0,) * len(shape)
    for v in operands:
        if isinstance(v, GPUArray):
            ptrs.append(v.data_ptr())
            strides.append(broadcast_strides(v, shape))
            fs.append(0.0)
            ints.append(0)
        else:
            ptrs.append(0)
            strides.append(zeros)
            fs.append(0.0 if v is None else v.f)
            ints.append(0 if v is None else v.i)
    while len(ptrs) < 4:
        ptrs.append(0)
        strides.append(zeros)
        fs.append(0.0)
        ints.append(0)
    rows = plan_nd(shape, tuple(strides))
    if len(rows) > MAX_DIMS:
        for i in range(shape[0]):
            launch(fn, op, in_dtype, out[i], split_leading(operands, shape, i), flags)
        return out
    sizes = [r[0] for r in rows]
    st = [[r[k + 1] for r in rows] for k in range(4)]
    dev = out._device
    # fmt: off
    fn(dev.index, stream_of(out), op, in_dtype, out._dtype.name, flags, sizes, ptrs, st, fs,
       ints)
    # fmt: on
    return out
