"""Elementwise binary ops, comparisons, where, clamp, cast and bias_add.

Binary ops broadcast like NumPy and accept a Python scalar on either side. The result dtype is
pygpukit.dtypes.result_type (scalars are weak, torch-style: int32 array + 2.5 -> float32,
float16 array + 2.5 -> float16). A scalar operand of an arithmetic op is passed to the backend as
a 0-d array of the *compute* dtype (float32 for half types), so `x_fp16 + 0.1` computes
x + 0.1f in float32 and rounds once, as torch's opmath does, instead of rounding 0.1 to float16
first. Comparisons and `where` convert a scalar to the result dtype itself (x == 0.1 on float16
compares with the float16 nearest 0.1).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, as_dtype, bool_
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "where",
    "clamp",
    "cast",
    "bias_add",
    "bias_add_inplace",
]


def _operands(op: str, a: Any, b: Any) -> tuple[DataType, tuple[int, ...]]:
    chk.array_or_scalar(op, "a", a)
    chk.array_or_scalar(op, "b", b)
    if not isinstance(a, GPUArray) and not isinstance(b, GPUArray):
        raise TypeError(
            f"{op}: needs at least one GPUArray operand, got {type(a).__name__} and "
            f"{type(b).__name__}"
        )
    rd = chk.promote(op, a, b)
    return rd, chk.broadcast(op, {"a": a, "b": b})


def _arith(op: str, a: Any, b: Any, out: GPUArray | None, no_bool: bool = False) -> GPUArray:
    rd, shape = _operands(op, a, b)
    if no_bool and rd is bool_:
        raise TypeError(f"{op}: not defined for bool operands; cast them to an integer type")
    chk.out_arg(op, out, shape, rd)
    ct = chk.compute_np_dtype(rd)
    args = (chk.scalar_operand(a, ct), chk.scalar_operand(b, ct))
    return run(op, args, {"out_dtype": rd.np_dtype}, out=out)


def add(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a + b (broadcasting; scalars allowed on either side)."""
    return _arith("add", a, b, out)


def sub(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a - b."""
    return _arith("sub", a, b, out, no_bool=True)


def mul(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a * b."""
    return _arith("mul", a, b, out)


def div(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """True division a / b; integer or bool operands give float32 (torch.true_divide)."""
    rd, shape = _operands("div", a, b)
    if rd.kind != "f":
        rd = as_dtype("float32")
    chk.out_arg("div", out, shape, rd)
    ct = chk.compute_np_dtype(rd)
    args = (chk.scalar_operand(a, ct), chk.scalar_operand(b, ct))
    return run("div", args, {"out_dtype": rd.np_dtype}, out=out)


def maximum(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """Elementwise max; NaN in either operand gives NaN (torch.maximum)."""
    return _arith("maximum", a, b, out)


def minimum(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """Elementwise min; NaN in either operand gives NaN (torch.minimum)."""
    return _arith("minimum", a, b, out)


def pow(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a ** b. Integer arrays raised to negative integer powers raise ValueError."""
    return _arith("pow", a, b, out, no_bool=True)


def _compare(op: str, a: Any, b: Any, out: GPUArray | None) -> GPUArray:
    rd, shape = _operands(op, a, b)
    chk.out_arg(op, out, shape, bool_)
    args = (chk.scalar_operand(a, rd.np_dtype), chk.scalar_operand(b, rd.np_dtype))
    return run(op, args, {}, out=out)


def eq(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a == b -> bool."""
    return _compare("eq", a, b, out)


def ne(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a != b -> bool."""
    return _compare("ne", a, b, out)


def lt(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a < b -> bool."""
    return _compare("lt", a, b, out)


def le(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a <= b -> bool."""
    return _compare("le", a, b, out)


def gt(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a > b -> bool."""
    return _compare("gt", a, b, out)


def ge(a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """a >= b -> bool."""
    return _compare("ge", a, b, out)


def where(cond: GPUArray, a: Any, b: Any, *, out: GPUArray | None = None) -> GPUArray:
    """cond ? a : b, broadcasting all three; a and b may be Python scalars."""
    chk.array("where", "cond", cond)
    if cond.dtype is not bool_:
        raise TypeError(f"where: cond must be a bool array, got {chk.desc(cond)}")
    chk.array_or_scalar("where", "a", a)
    chk.array_or_scalar("where", "b", b)
    rd = chk.promote("where", a, b)
    shape = chk.broadcast("where", {"cond": cond, "a": a, "b": b})
    chk.out_arg("where", out, shape, rd)
    args = (cond, chk.scalar_operand(a, rd.np_dtype), chk.scalar_operand(b, rd.np_dtype))
    return run("where", args, {"out_dtype": rd.np_dtype}, out=out)


def clamp(
    x: GPUArray,
    min: Any = None,
    max: Any = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """min(max(x, min), max); either bound may be None, a Python scalar or a GPUArray.

    NaN in x stays NaN; if min > max every element becomes max (torch.clamp semantics).
    """
    chk.array("clamp", "x", x)
    chk.computable("clamp", "x", x, allow_bool=False)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    # Result dtype: result_type(result_type(x, min), max), torch.clamp's promotion.
    rd = x.dtype
    for name, bound in (("min", min), ("max", max)):
        if bound is not None:
            chk.array_or_scalar("clamp", name, bound)
            rd = chk.promote("clamp", chk.Typed(rd, x.shape), bound, ("x", name))
    shape = chk.broadcast("clamp", {"x": x, "min": min, "max": max})
    chk.out_arg("clamp", out, shape, rd)
    ct = chk.compute_np_dtype(rd)
    lo = None if min is None else chk.scalar_operand(min, ct)
    hi = None if max is None else chk.scalar_operand(max, ct)
    return run("clamp", (x, lo, hi), {"out_dtype": rd.np_dtype}, out=out)


def cast(x: GPUArray, dtype: Any, *, out: GPUArray | None = None) -> GPUArray:
    """x converted to `dtype` (round to nearest even; the op behind GPUArray.astype)."""
    chk.array("cast", "x", x)
    dt = as_dtype(dtype)
    if dt.is_packed or x.dtype.is_packed:
        raise TypeError(
            f"cast: int4 is a packed storage type (x has {chk.desc(x)}, target {dt.name}); "
            "use x.astype(...), which converts through the host"
        )
    if dt.is_complex or x.dtype.is_complex:
        raise TypeError(
            f"cast: complex is a storage type (x has {chk.desc(x)}, target {dt.name}); "
            "use x.astype(...) between complex64 and complex128, gp.view_as_real otherwise"
        )
    chk.out_arg("cast", out, x.shape, dt)
    return run("cast", (x,), {"dtype": dt.np_dtype}, out=out)


def _bias_checks(op: str, x: GPUArray, bias: GPUArray) -> None:
    chk.array(op, "x", x)
    chk.array(op, "bias", bias)
    chk.floating(op, "x", x)
    chk.floating(op, "bias", bias)
    if x.ndim < 1 or bias.shape != (x.shape[-1],):
        raise ValueError(
            f"{op}: bias has shape {bias.shape} but must be ({x.shape[-1] if x.ndim else '?'},), "
            f"x's last dim (x has {chk.desc(x)})"
        )


def bias_add(x: GPUArray, bias: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """x + bias over the last axis; result in x's dtype."""
    _bias_checks("bias_add", x, bias)
    chk.out_arg("bias_add", out, x.shape, x.dtype)
    return run("bias_add", (x, bias), {}, out=out)


def bias_add_inplace(x: GPUArray, bias: GPUArray) -> GPUArray:
    """x += bias over the last axis (0.2.x API); returns x."""
    _bias_checks("bias_add_inplace", x, bias)
    return run("bias_add", (x, bias), {}, out=x)
