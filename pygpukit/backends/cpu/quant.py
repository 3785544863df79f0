"""FP8 quantization (NumPy reference); the scaled product is matmul_fp8.py.

Scales are dequantization multipliers: x ~= q * scale, with one scale per *group* of
``(br, bc)`` elements of the 2-D view [R, C] of an array (R = the product of the leading dims, C
the last dim). The granularities are groups: tensor (R, C), row (1, C), block (br, bc) (1x128
activation blocks, 128x128 weight blocks). The ops layer (pygpukit/ops/quant.py) turns scale
shapes and granularities into the ``(br, bc)`` pairs these functions take.

quantize_fp8, per group: amax = max |x| (float32), scale = amax / fp8_max rounded to float32
(a group of zeros gets scale 1.0, so its codes are 0 and it dequantizes to 0), q = the float32
quotient x / scale clamped to +-fp8_max (e4m3fn 448, e5m2 57344) and rounded to the nearest
fp8 value, ties to even (ml_dtypes' conversion). A group holding NaN or inf gets a NaN or inf
scale; its codes are not meaningful.

dequantize_fp8: the float32 product q * scale rounded once to the result dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._common import Array, DTypeLike, finish

__all__ = ["FP8_MAX", "dequantize_fp8", "expand_scale", "quantize_fp8"]

FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
_NP_FP8 = {
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _as2d(x: Array) -> Array:
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def expand_scale(scale: Array, rows: int, cols: int, group: tuple[int, int]) -> Array:
    """The per-element multiplier [rows, cols] of a scale with one value per ``group``."""
    br, bc = group
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols))
    s = np.asarray(scale).reshape(_cdiv(rows, br), _cdiv(cols, bc))
    return np.repeat(np.repeat(s, br, axis=0), bc, axis=1)[:rows, :cols]


def quantize_fp8(
    x: Array, *, dtype: str = "float8_e4m3fn", group: tuple[int, int], scale_shape: tuple[int, ...]
) -> tuple[Array, Array]:
    """(q, scale): q of x's shape and fp8 ``dtype``, scale float32 of ``scale_shape``."""
    x = np.asarray(x)
    x2 = _as2d(x)
    rows, cols = x2.shape
    br, bc = group
    nr, nc = _cdiv(rows, br), _cdiv(cols, bc)
    fmax = np.float32(FP8_MAX[dtype])
    xf = x2.astype(np.float32)
    padded = np.zeros((nr * br, nc * bc), np.float32)
    padded[:rows, :cols] = np.abs(xf)
    amax = padded.reshape(nr, br, nc, bc).max(axis=(1, 3))
    with np.errstate(all="ignore"):
        scale = (amax / fmax).astype(np.float32)
        scale = np.where(scale == 0, np.float32(1.0), scale)
        y = xf / expand_scale(scale, rows, cols, group)
        q = np.clip(y, -fmax, fmax).astype(_NP_FP8[dtype])
    return q.reshape(x.shape), np.ascontiguousarray(scale.reshape(scale_shape))


def dequantize_fp8(
    q: Array, scale: Array, *, out_dtype: DTypeLike, group: tuple[int, int]
) -> Array:
    """q * scale (float32 product, one rounding to ``out_dtype``), q's shape."""
    q = np.asarray(q)
    q2 = _as2d(q)
    rows, cols = q2.shape
    mult = expand_scale(np.asarray(scale, np.float32), rows, cols, group)
    with np.errstate(all="ignore"):
        return finish((q2.astype(np.float32) * mult).reshape(q.shape), out_dtype)
