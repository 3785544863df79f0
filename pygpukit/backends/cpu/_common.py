"""Dtype rules shared by the NumPy backend.

The backend's numerics contract (docs/design.md, "correct"): a float64 input is computed in
float64; every other float type (float32, float16, bfloat16, fp8) is upcast to float32, computed,
and rounded once to the result dtype, as a GPU kernel with a float32 accumulator would do.
Integer arithmetic stays in the integer type.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
DTypeLike = npt.DTypeLike

# ml_dtypes types report kind 'V' (or 'f' for some fp8), so np.issubdtype cannot classify them.
_ML_FLOATS = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
    )
)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def is_float(dtype: DTypeLike) -> bool:
    """True for NumPy floats and the ml_dtypes floats (bfloat16, fp8)."""
    dt = np.dtype(dtype)
    return dt in _ML_FLOATS or dt.kind == "f"


def is_integer(dtype: DTypeLike) -> bool:
    """True for signed and unsigned integers (not bool)."""
    return np.dtype(dtype).kind in "iu"


def compute_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """The dtype arithmetic for a result of `dtype` runs in.

    float64 -> float64, other floats -> float32 (every half/bf16/fp8 value is exact in
    float32), integers and bool -> themselves.
    """
    dt = np.dtype(dtype)
    if dt == _F64:
        return _F64
    if is_float(dt):
        return _F32
    return dt


def float_compute_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """Like compute_dtype, but integers and bool compute in float32 (torch's default float)."""
    dt = compute_dtype(dtype)
    return dt if is_float(dt) else _F32


def float_result(dtype: DTypeLike) -> np.dtype[Any]:
    """Result dtype of a float-valued op (exp, sigmoid, mean, ...): floats keep their dtype,
    integers and bool give float32, as in torch."""
    dt = np.dtype(dtype)
    return dt if is_float(dt) else _F32


def promote(*dtypes: DTypeLike) -> np.dtype[Any]:
    """Default result dtype when the caller passes no out_dtype.

    The op layer passes the real promotion (pygpukit.dtypes.result_type); this fallback follows
    torch for arrays: one float type wins over integers; two different float types give float64
    if one is float64, else float32 (torch promotes float16 + bfloat16 to float32); integers
    follow NumPy.
    """
    dts = [np.dtype(d) for d in dtypes]
    floats = {d for d in dts if is_float(d)}
    if len(floats) == 1:
        return floats.pop()
    if floats:
        return _F64 if _F64 in floats else _F32
    return np.result_type(*dts)


def upcast(x: Array, dtype: DTypeLike) -> Array:
    """`x` converted to the compute dtype for a result of `dtype` (no copy when already there)."""
    return np.asarray(x).astype(compute_dtype(dtype), copy=False)


def finish(y: Any, dtype: DTypeLike) -> Array:
    """Round the computed result once to the result dtype.

    Always a fresh C-contiguous array: the caller wraps it or copies it into `out=`, and a result
    that aliased an input (cast to the same dtype, relu of an int array) would be a hazard.
    """
    return np.asarray(y).astype(np.dtype(dtype), order="C", copy=True)
