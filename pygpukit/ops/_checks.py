"""Argument checks shared by the op modules.

Every public op validates before anything runs (docs/design.md, "One call, end to end") and its
errors name the op, the offending argument, and that argument's shape and dtype, e.g.
"rmsnorm: weight has shape (7,) but x's last dim is 8".
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, bool_, float32, int64, result_type

Scalar = bool | int | float


def desc(x: Any) -> str:
    """'shape (2, 3) and dtype float32' for error messages."""
    return f"shape {x.shape} and dtype {x.dtype.name}"


class Typed:
    """A dtype and shape standing in for an array in promotion (result_type reads .dtype)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: DataType, shape: tuple[int, ...]) -> None:
        self.dtype = dtype
        self.shape = shape


def array(op: str, name: str, x: Any) -> GPUArray:
    """x itself when it is a GPUArray, else a TypeError naming the argument."""
    if not isinstance(x, GPUArray):
        hint = " (convert with gp.from_numpy)" if isinstance(x, np.ndarray) else ""
        raise TypeError(f"{op}: {name} must be a GPUArray, got {type(x).__name__}{hint}")
    return x


def is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.ndarray)


def array_or_scalar(op: str, name: str, v: Any) -> None:
    if not isinstance(v, GPUArray) and not is_scalar(v):
        raise TypeError(
            f"{op}: {name} must be a GPUArray or a Python bool/int/float, got {type(v).__name__}"
        )


def floating(op: str, name: str, x: GPUArray) -> None:
    """x must be a computable float type (fp8 and int4 are storage formats: cast first)."""
    if x.dtype.kind != "f":
        raise TypeError(
            f"{op}: {name} must be a float16/bfloat16/float32/float64 array, got {desc(x)}"
            + ("; cast it first, e.g. x.astype(gp.float32)" if x.dtype.is_fp8 else "")
        )


def computable(op: str, name: str, x: GPUArray, allow_bool: bool = True) -> None:
    """x must hold arithmetic values: float, integer (or bool when allowed), not fp8/int4."""
    if x.dtype.kind in ("f8", "q") or (x.dtype.kind == "b" and not allow_bool):
        raise TypeError(
            f"{op}: {name} must be a numeric array (float or integer), got {desc(x)}"
            + ("; cast it first, e.g. x.astype(gp.float32)" if x.dtype.is_fp8 else "")
        )


def promote(op: str, a: Any, b: Any, names: tuple[str, str] = ("a", "b")) -> DataType:
    """pygpukit.dtypes.result_type with the op and argument names added to its errors."""
    arrays = (GPUArray, Typed)
    if not isinstance(a, arrays) and not isinstance(b, arrays):
        return _scalar_pair_dtype(a, b)
    try:
        return result_type(a, b)
    except (TypeError, ValueError) as exc:
        da = desc(a) if isinstance(a, arrays) else f"{type(a).__name__} {a!r}"
        db = desc(b) if isinstance(b, arrays) else f"{type(b).__name__} {b!r}"
        raise type(exc)(f"{op}: {names[0]} ({da}) and {names[1]} ({db}): {exc}") from None


def _scalar_pair_dtype(a: Scalar, b: Scalar) -> DataType:
    # Two Python scalars (where's a and b): the stronger kind's default dtype.
    if isinstance(a, float) or isinstance(b, float):
        return float32
    if isinstance(a, bool) and isinstance(b, bool):
        return bool_
    return int64


def compute_np_dtype(dt: DataType) -> np.dtype[Any]:
    """NumPy dtype a kernel computes a result of `dt` in: float64 stays, other floats -> float32
    (opmath, as torch does for half types), integers/bool themselves."""
    if dt.kind == "f":
        return np.dtype(np.float64) if dt.bits == 64 else np.dtype(np.float32)
    res: np.dtype[Any] = np.dtype(dt.np_dtype)
    return res


def scalar_operand(v: Any, dt: np.dtype[Any]) -> Any:
    """A GPUArray passes through; a Python scalar becomes a 0-d NumPy array of `dt`."""
    return v if isinstance(v, GPUArray) else np.asarray(v, dtype=dt)


def broadcast(op: str, named: dict[str, Any]) -> tuple[int, ...]:
    """Broadcast shape of the GPUArray arguments; a ValueError listing them when incompatible."""
    shapes = {k: v.shape for k, v in named.items() if isinstance(v, GPUArray)}
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        listed = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise ValueError(f"{op}: shapes do not broadcast: {listed}") from None


def axis_arg(op: str, axis: Any, ndim: int) -> int:
    """A normalised axis in [0, ndim)."""
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}") from None
    if not -ndim <= a < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for an array of {ndim} dims")
    return a % max(ndim, 1)


def axes_arg(op: str, axis: Any, ndim: int) -> tuple[int, ...] | None:
    """None, or a tuple of distinct normalised axes (from an int or a sequence of ints)."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        axes = tuple(axis_arg(op, a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{op}: axis {tuple(axis)} repeats an axis")
        return axes
    return (axis_arg(op, axis, ndim),)


def reduced_shape(
    shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims: bool
) -> tuple[int, ...]:
    red = set(range(len(shape))) if axes is None else set(axes)
    if keepdims:
        return tuple(1 if i in red else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in red)


def out_arg(op: str, out: Any, shape: tuple[int, ...], dtype: DataType) -> GPUArray | None:
    """Check a user's out= buffer against the result's shape and dtype (before anything runs)."""
    if out is None:
        return None
    if not isinstance(out, GPUArray):
        raise TypeError(f"{op}: out must be a GPUArray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"{op}: out has {desc(out)} but the result has shape {tuple(shape)}")
    if out.dtype is not dtype:
        raise TypeError(f"{op}: out has {desc(out)} but the result dtype is {dtype.name}")
    return out


def as_int(op: str, name: str, v: Any) -> int:
    """v as a Python int: TypeError for a bool, a float or another non-integer."""
    if isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be an int, got bool {v!r}")
    try:
        return int(operator.index(v))
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__}") from None


def int_arg(op: str, name: str, v: Any, lo: int) -> int:
    """v as an int >= lo (as_int's TypeErrors; ValueError below lo)."""
    i = as_int(op, name, v)
    if i < lo:
        raise ValueError(f"{op}: {name} must be >= {lo}, got {i}")
    return int(i)


def choice(op: str, name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{op}: {name} must be one of {allowed}, got {value!r}")


def positive_float(op: str, name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{op}: {name} must be a positive number, got {value!r}")


def scale_arg(op: str, scale: Any) -> None:
    """An attention/softmax scale: a Python int or float, or None for the op's default."""
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a number or None, got {scale!r}")


def rope_table_pair(op: str, cos: GPUArray, sin: GPUArray) -> None:
    """RoPE tables cos and sin (cos checked 2-D already): sin of cos's shape, and at least one
    position (the kernels read a table row for every position)."""
    if sin.shape != cos.shape:
        raise ValueError(f"{op}: sin has shape {sin.shape} but cos has shape {cos.shape}")
    if cos.shape[0] == 0:
        raise ValueError(f"{op}: cos has shape {cos.shape}: the tables cover no position")


def int32_array(op: str, name: str, t: Any) -> GPUArray:
    """t itself when it is an int32 GPUArray (lengths, offsets, positions, block tables)."""
    x = array(op, name, t)
    if x.dtype.name != "int32":
        raise TypeError(f"{op}: {name} must be an int32 array, got {desc(x)}")
    return x
