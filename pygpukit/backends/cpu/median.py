"""The 1-D median filter in NumPy: the reference of pygpukit/ops/median.py's contract.

The same selection as the Triton kernel (backends/triton_kernels/median.py), so the two agree
bit for bit: values become integer keys ordered as the floats are (-0.0 below +0.0), the axis
is extended by half-sample reflection (np.pad mode 'symmetric', which is scipy.ndimage's
'reflect', repeated when the window is longer than the axis), the key of rank size // 2 of each
window is selected (np.partition) and turned back into bits. A window holding a NaN gives the
dtype's default NaN. Rows are processed in chunks so the window copies stay near _CHUNK keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._common import Array

__all__ = ["median_filter"]

_CHUNK = 1 << 22

# itemsize -> (the integer type of the bits, the key type, the magnitude mask)
_KEYS: dict[int, tuple[Any, Any, int]] = {
    8: (np.int64, np.int64, 0x7FFFFFFFFFFFFFFF),
    4: (np.int32, np.int32, 0x7FFFFFFF),
    2: (np.int16, np.int32, 0x7FFF),
}


def _keys(a: Array) -> Array:
    bits_t, key_t, mag = _KEYS[a.dtype.itemsize]
    b = np.ascontiguousarray(a).view(bits_t).astype(key_t)
    sign = b >> (8 * np.dtype(key_t).itemsize - 1)  # 0 or -1 (arithmetic shift)
    return b ^ (sign & key_t(mag))  # type: ignore[no-any-return]


def _values(k: Array, dtype: np.dtype[Any]) -> Array:
    bits_t, key_t, mag = _KEYS[dtype.itemsize]
    sign = k >> (8 * np.dtype(key_t).itemsize - 1)
    return (k ^ (sign & key_t(mag))).astype(bits_t).view(dtype)  # type: ignore[no-any-return]


def median_filter(x: Array, *, size: int) -> Array:
    """The median of each window of ``size`` (odd) values along x's last axis; see the module
    docstring."""
    a = np.asarray(x)
    if a.size == 0:
        return a.copy()
    n = a.shape[-1]
    rows = a.reshape(-1, n)
    h = size // 2
    res = np.empty(rows.shape, a.dtype)
    nan = np.array(np.nan).astype(a.dtype)
    step = max(1, _CHUNK // (n * size))
    for r0 in range(0, rows.shape[0], step):
        part = rows[r0 : r0 + step]
        keys = np.pad(_keys(part), ((0, 0), (h, h)), mode="symmetric")
        med = np.partition(sliding_window_view(keys, size, axis=-1), h, axis=-1)[..., h]
        vals = _values(med, a.dtype)
        isnan = np.pad(np.isnan(part), ((0, 0), (h, h)), mode="symmetric")
        has_nan = sliding_window_view(isnan, size, axis=-1).any(axis=-1)
        res[r0 : r0 + step] = np.where(has_nan, nan, vals)
    return res.reshape(a.shape)
