"""The one place where host values become elements of a dtype: creation, fill and setitem.

NumPy's ``astype`` wraps out-of-range integers (300 -> 44 in uint8), turns NaN and inf into
INT_MIN in integer arrays and None into NaN, with at most a RuntimeWarning. Here such a value is
refused with a ConversionError naming it, its position and the dtype, before anything is written.
Accepted conversions run with NumPy's warnings silenced, because every case that would warn has
been refused. Floats into integers truncate toward zero (NumPy's and C's rule); that is a
documented conversion, not a corruption, so it is kept.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from pygpukit.dtypes import DataType, float32, float64
from pygpukit.errors import ConversionError

__all__ = ["scalar", "array"]

_INT4_RANGE = (-8, 7)


def _int_range(dt: DataType) -> tuple[int, int]:
    if dt.is_packed:
        return _INT4_RANGE
    info = np.iinfo(dt.np_dtype)
    return int(info.min), int(info.max)


def _is_int_target(dt: DataType) -> bool:
    return dt.is_integer or dt.is_packed


def _has_inf(dt: DataType) -> bool:
    # float8_e4m3fn has NaN but no infinity: inf would silently become NaN.
    return dt.name != "float8_e4m3fn"


def scalar(value: Any, dt: DataType, what: str) -> np.ndarray:
    """A 0-d NumPy array of ``dt`` holding ``value`` exactly (floats to ints truncated)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if value is None:
        raise ConversionError(f"{what}: None has no {dt.name} value (it is not a number)")
    if dt.is_complex:
        return _complex_scalar(value, dt, what)
    if isinstance(value, (bool, np.bool_)):
        return _cast0(np.asarray(bool(value)), dt)
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if _is_int_target(dt):
            lo, hi = _int_range(dt)
            if not lo <= v <= hi:
                raise ConversionError(
                    f"{what}: {v} is out of range for {dt.name} [{lo}, {hi}]"
                ) from None
            return _cast0(np.asarray(v, dtype=np.int64), dt)
        if dt.kind == "b":
            return _cast0(np.asarray(v != 0), dt)
        try:
            f = float(v)
        except OverflowError:
            raise ConversionError(f"{what}: {v} is out of range for {dt.name}") from None
        return _float_into(f, dt, what, repr(v))
    if isinstance(value, (float, np.floating)):
        return _float_into(float(value), dt, what, repr(value))
    raise ConversionError(
        f"{what}: a {dt.name} element must be a bool, int or float, got "
        f"{type(value).__name__} {value!r}"
    )


def _complex_scalar(value: Any, dt: DataType, what: str) -> np.ndarray:
    if not isinstance(value, (bool, int, float, complex, np.bool_, np.number)):
        raise ConversionError(
            f"{what}: a {dt.name} element must be a number, got {type(value).__name__} {value!r}"
        )
    try:
        z = complex(value)
    except OverflowError:
        raise ConversionError(f"{what}: {value!r} is out of range for {dt.name}") from None
    src = np.asarray([z.real, z.imag])
    out = _cast0(src, _HALF_OF[dt.name])
    _check_float_result(src, out, _HALF_OF[dt.name], what, dt.name)
    return np.asarray(complex(out[0], out[1]), dtype=dt.np_dtype)


def _complex_array(src: np.ndarray, dt: DataType, what: str) -> np.ndarray:
    """A real or complex array into complex ``dt``: each of the real and imaginary parts
    converts as a float would (finite values that overflow are refused)."""
    kind = src.dtype.kind
    if kind not in "biufc" and src.dtype.name not in _ML_FLOATS:
        raise ConversionError(
            f"{what}: values of NumPy dtype {src.dtype} cannot be stored in a {dt.name} array"
        )
    if src.dtype.name in _ML_FLOATS:
        src = src.astype(np.float32)  # exact: every ml_dtypes float fits float32
    if np.can_cast(src.dtype, dt.np_dtype, "safe"):
        return src.astype(dt.np_dtype)
    half = _HALF_OF[dt.name]
    parts = np.stack([src.real, src.imag]) if kind == "c" else src.astype(np.float64)
    got = _cast0(parts, half)
    _check_float_result(parts, got, half, what, dt.name)
    return np.asarray(src.astype(dt.np_dtype))


def _float_into(f: float, dt: DataType, what: str, shown: str) -> np.ndarray:
    if _is_int_target(dt) or dt.kind == "b":
        if math.isnan(f) or math.isinf(f):
            raise ConversionError(f"{what}: {shown} has no {dt.name} value")
        if dt.kind != "b":
            lo, hi = _int_range(dt)
            if not lo <= math.trunc(f) <= hi:
                raise ConversionError(f"{what}: {shown} is out of range for {dt.name} [{lo}, {hi}]")
        return _cast0(np.asarray(f), dt)
    out = _cast0(np.asarray(f), dt)
    _check_float_result(np.asarray(f), out, dt, what)
    return out


def _cast0(host: np.ndarray, dt: DataType) -> np.ndarray:
    target = np.int8 if dt.is_packed else dt.np_dtype
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return host.astype(target)


def _check_float_result(
    src: np.ndarray, out: np.ndarray, dt: DataType, what: str, label: str = ""
) -> None:
    """Refuse finite values that overflowed, and inf into a dtype without infinity (label: the
    dtype named in the message, when not dt: a complex dtype whose parts are dt)."""
    with np.errstate(all="ignore"):
        s = src.astype(np.float64)
        o = out.astype(np.float64)
        bad = (np.isfinite(s) & ~np.isfinite(o)) | (np.isinf(s) & ~np.isinf(o))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        v = s[idx] if s.ndim else s[()]
        where = f"element {list(idx)} is " if s.ndim else ""
        if np.isinf(v) and not _has_inf(dt):
            raise ConversionError(
                f"{what}: {where}{float(v)!r}, which has no {dt.name} value (no infinity)"
            )
        raise ConversionError(
            f"{what}: {where}{float(v)!r}, out of range for {label or dt.name} "
            f"(largest finite value {float(_finfo_max(dt))!r})"
        )


def _finfo_max(dt: DataType) -> float:
    try:
        import ml_dtypes

        return float(ml_dtypes.finfo(dt.np_dtype).max)
    except (ImportError, ValueError, TypeError):
        return float(np.finfo(dt.np_dtype).max)


def array(host: Any, dt: DataType, what: str) -> np.ndarray:
    """``host`` (a NumPy array) converted to ``dt``'s NumPy dtype, or a ConversionError naming
    the first element that has no exact place there. int4 returns int8 values in [-8, 7]."""
    src = np.asarray(host)
    target = np.dtype(np.int8) if dt.is_packed else dt.np_dtype
    if src.dtype == target:
        return src
    if src.dtype.kind == "O":
        src = _from_objects(src, dt, what)
        if src.dtype == target:
            return src
    if dt.is_complex:
        return _complex_array(src, dt, what)
    kind = src.dtype.kind
    if kind == "c":
        raise ConversionError(
            f"{what}: complex values (NumPy dtype {src.dtype}) cannot be stored in a {dt.name} "
            "array: the imaginary part would be dropped; take gp.view_as_real of a complex "
            "array instead"
        )
    if kind not in "biuf" and src.dtype.name not in _ML_FLOATS:
        raise ConversionError(
            f"{what}: values of NumPy dtype {src.dtype} cannot be stored in a {dt.name} array"
        )
    if not dt.is_packed and np.can_cast(src.dtype, target, "safe"):
        return src.astype(target)
    if _is_int_target(dt) or dt.kind == "b":
        _check_into_int(src, dt, what)
        return _cast0(src, dt)
    out = _cast0(src, dt)
    _check_float_result(src, out, dt, what)
    return out


_ML_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
# The float type of the real and of the imaginary part of each complex dtype.
_HALF_OF = {"complex64": float32, "complex128": float64}


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def _check_into_int(src: np.ndarray, dt: DataType, what: str) -> None:
    if src.size == 0 or src.dtype.kind == "b":
        return
    if src.dtype.kind in "iu":
        if dt.kind == "b":
            return
        lo, hi = _int_range(dt)
        bad = (src < lo) | (src > hi)
    else:
        with np.errstate(all="ignore"):
            s = src.astype(np.float64)
            nonfinite = ~np.isfinite(s)
            if nonfinite.any():
                idx = _first(nonfinite)
                v = s[idx] if idx else s[()]
                raise ConversionError(
                    f"{what}: element {list(idx)} is {float(v)!r}, which has no {dt.name} value"
                )
            if dt.kind == "b":
                return
            lo, hi = _int_range(dt)
            t = np.trunc(s)
            bad = (t < lo) | (t > hi)
    if bad.any():
        idx = _first(bad)
        v = src[idx] if idx else src[()]
        raise ConversionError(
            f"{what}: element {list(idx)} is {v.item()!r}, out of range for {dt.name} [{lo}, {hi}]"
        )


def _from_objects(src: np.ndarray, dt: DataType, what: str) -> np.ndarray:
    """An object array (a list holding None, huge ints, strings...) converted element by element,
    each through scalar() so that the first bad element is named with its index."""
    out = np.empty(src.shape, dtype=np.int8 if dt.is_packed else dt.np_dtype)
    flat = out.reshape(-1)
    for i, v in enumerate(src.reshape(-1)):
        idx = [int(j) for j in np.unravel_index(i, src.shape)] if src.ndim else []
        flat[i] = scalar(v, dt, f"{what}: element {idx}")
    return out
