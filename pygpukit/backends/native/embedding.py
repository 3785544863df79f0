"""Embedding gather (table[ids]) and bias_add on the native backend: the twins of
triton_kernels/embedding.py, same signatures and semantics
(native/src/embedding/embedding.cu).

embedding: ids of any shape and integer dtype are read in place when they step with one stride
(else copied, they are small); the table is read in place with any strides and any dtype (rows
are copied as words of the element size); an out= whose rows step with one stride is written in
place. An id outside [0, num_embeddings) gives a NaN row for float tables and a zero row
otherwise, with no host sync (the Triton twin's convention; the NumPy reference raises).

bias_add: x + bias over the last axis, the sum in x's compute type, one rounding; x read in
place when its rows step with one stride; out may be x (bias_add_inplace).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from pygpukit._layout import single_stride
from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import compute_name
from pygpukit.backends._support.output import deliver
from pygpukit.backends._support.rows import in_rows, out_rows
from pygpukit.backends.native._common import served_as, stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["bias_add", "embedding"]

_IDS = frozenset({"int8", "uint8", "int16", "int32", "int64"})
_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})


@cache
def _fill_bits(dt: DataType) -> int:
    """The bit pattern an out-of-range id's row is filled with: NaN for floats, else 0."""
    if not dt.is_floating:
        return 0
    word = np.dtype(f"u{dt.itemsize}")
    return int(np.full(1, np.nan, dtype=dt.np_dtype).view(word)[0])


def embedding(ids: GPUArray, table: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """table[ids] -> ids.shape + (dim,)."""
    if ids._dtype.name not in _IDS:
        ids = ids.astype("int64") if ids._dtype.is_integer else ids
    if ids._dtype.name not in _IDS:
        raise TypeError(f"embedding: ids must be an integer array, got {ids._dtype.name}")
    tdt = table._dtype
    if tdt.kind == "q" or tdt.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"embedding: tables of {tdt.name} are not supported")
    dim = table._shape[1]
    shape = (*ids._shape, dim)
    y, sy = out_rows("embedding", out, shape, tdt, table)
    n = ids.size
    if n and dim:
        si = single_stride(ids._shape, ids._estrides, 1)  # 0-d and size-1 ids: 1
        if si is None:
            ids = ids.contiguous()
            si = 1
        # fmt: off
        extension().embedding(
            table._device.index, stream_of(table), ids._dtype.name, tdt.itemsize, n,
            ids.data_ptr(), si, table.data_ptr(), table._shape[0], dim, *table._estrides,
            y.data_ptr(), sy, _fill_bits(tdt),
        )
        # fmt: on
    return deliver(y, out)


def bias_add(
    x: GPUArray, bias: GPUArray, *, out_dtype: Any = None, out: GPUArray | None = None
) -> GPUArray:
    """x + bias (bias [x.shape[-1]] broadcast over the leading dims); out may be x (in place)."""
    rd = x._dtype if out_dtype is None else as_dtype(out_dtype)
    if rd.name not in _FLOATS:
        raise TypeError(f"bias_add: the native kernel adds in float types, not {rd.name}")
    x = served_as("bias_add", x, rd)
    shape = x._shape
    n = shape[-1] if shape else 1
    if bias._shape != (n,):
        bias = bias.broadcast_to((n,))
    ct = compute_name(rd)
    if bias._dtype.name not in (rd.name, ct):
        bias = bias.astype(ct)  # what the kernel's own load would convert it to
    if n > 1 and bias._estrides[0] != 1:
        bias = bias.contiguous()  # n values: the kernel reads the bias as one contiguous row
    y, sy = out_rows("bias_add", out, shape, rd, x)
    if x.size:
        x, sx = in_rows(x)
        # fmt: off
        extension().bias_add(
            x._device.index, stream_of(x), rd.name, bias._dtype.name, x.size // n, n,
            x.data_ptr(), sx, bias.data_ptr(), y.data_ptr(), sy,
        )
        # fmt: on
    return deliver(y, out)
