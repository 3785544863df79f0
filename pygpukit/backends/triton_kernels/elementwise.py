"""Binary arithmetic, comparisons, where and clamp (launchers mirror pygpukit.backends.cpu).

Operands are GPUArrays (any strides; broadcast operands as stride-0 views or any shape that
broadcasts to the result) or scalars (Python numbers, NumPy scalars or 0-d arrays, as the op layer
passes them). Numerics follow the NumPy backend: arithmetic runs in compute_dtype(out_dtype)
(float64 for float64, float32 for the other floats, the integer type itself; bool in int32, turned
back into bool by != 0, so bool add/mul are or/and as in NumPy) and rounds once to out_dtype;
comparisons run in the compute dtype of the operands' promoted type; where converts each
operand to the result dtype exactly (copy.convert).

Differences from the NumPy backend, none of which the op layer can produce silently:
- pow of integers with a negative exponent: NumPy raises ValueError; a kernel cannot raise
  without a host sync, so it returns torch's values (1 for base 1, +-1 for base -1, else 0).
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from pygpukit.backends._support.signatures import binary, compare
from pygpukit.backends.cpu._common import float_result as np_float_result
from pygpukit.backends.cpu._common import promote as np_promote
from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    as_dt,
    compute_tl,
    libdevice,
    new_out,
    scalar_bits,
    tl_dtype,
)
from pygpukit.backends.triton_kernels._map import run_map
from pygpukit.backends.triton_kernels.copy import convert

__all__ = [
    "add",
    "clamp",
    "div",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "ne",
    "pow",
    "sub",
    "where",
]


@triton.jit
def fmax(x, y):
    """max with NaN propagation for floats (torch.maximum / np.maximum)."""
    if x.dtype.is_floating():
        r = tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)
    else:
        r = tl.maximum(x, y)
    return r


@triton.jit
def fmin(x, y):
    if x.dtype.is_floating():
        r = tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL)
    else:
        r = tl.minimum(x, y)
    return r


@triton.jit
def _ipow(x, e):
    """Integer power by square-and-multiply in x's type (wraps on overflow like NumPy; any
    multiplication order gives the same result modulo 2**bits)."""
    x, e = tl.broadcast(x, e)
    r = x * 0 + 1
    base = x
    ee = e
    for _ in range(x.dtype.primitive_bitwidth):
        r = tl.where((ee & 1) != 0, r * base, r)
        base = base * base
        ee = ee >> 1
    neg_pow = tl.where(x == 1, 1, tl.where(x == -1, 1 - 2 * (e & 1), 0)).to(x.dtype)
    return tl.where(e < 0, neg_pow, r)


@triton.jit
def binary_fn(a, b, c, CT: tl.constexpr, OP: tl.constexpr):
    x, y = tl.broadcast(a.to(CT), b.to(CT))  # one may be a scalar operand; div_rn wants shapes
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "div":
        if CT == tl.float32:
            r = tl.div_rn(x, y)  # correctly rounded, as NumPy (Triton's '/' may be approximate)
        else:
            r = x / y
    elif OP == "maximum":
        r = fmax(x, y)
    elif OP == "minimum":
        r = fmin(x, y)
    elif OP == "pow":
        if CT.is_floating():
            r = libdevice.pow(x, y)
        else:
            r = _ipow(x, y)
    elif OP == "eq":
        r = x == y
    elif OP == "ne":
        r = x != y
    elif OP == "lt":
        r = x < y
    elif OP == "le":
        r = x <= y
    elif OP == "gt":
        r = x > y
    else:
        r = x >= y
    return r


@triton.jit
def _where_fn(c, a, b, CT: tl.constexpr, RD: tl.constexpr):
    return tl.where(c != 0, convert(a, RD), convert(b, RD))


@triton.jit
def _clamp_fn(a, lo, hi, CT: tl.constexpr, HAS: tl.constexpr):
    y = a.to(CT)
    if HAS & 1:
        y = fmax(y, lo.to(CT))
    if HAS & 2:
        y = fmin(y, hi.to(CT))
    return y


def _np_dtype(v: Any) -> np.dtype[Any]:
    if isinstance(v, GPUArray):
        return v.dtype.np_dtype
    if isinstance(v, (np.ndarray, np.generic)):
        return v.dtype
    return np.asarray(v).dtype


def _operand(v: Any, ct: Any) -> Any:
    return v if isinstance(v, GPUArray) else scalar_bits(v, ct)


def _like(*vals: Any) -> GPUArray:
    for v in vals:
        if isinstance(v, GPUArray):
            return v
    raise TypeError("needs at least one GPUArray operand")


def _shape(*vals: Any) -> tuple[int, ...]:
    shapes = [v.shape for v in vals if isinstance(v, GPUArray)]
    if len(shapes) == 1 or all(s == shapes[0] for s in shapes):
        return shapes[0]
    return tuple(np.broadcast_shapes(*shapes))


_promoted: dict[tuple[Any, ...], Any] = {}


def _promote(a: Any, b: Any, div: bool = False) -> Any:
    """The NumPy backend's default result dtype for operands a, b (cached per dtype pair)."""
    key = (_np_dtype(a), _np_dtype(b), div)
    rd = _promoted.get(key)
    if rd is None:
        rd = np_promote(key[0], key[1])
        rd = as_dt(np_float_result(rd) if div else rd)
        _promoted[key] = rd
    return rd


def _arith(op: str, a: Any, b: Any, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    rd = _promote(a, b, op == "div") if out_dtype is None else as_dt(out_dtype)
    if op == "div" and not rd.is_floating:
        raise TypeError(f"div: true division needs a floating out_dtype, got {rd.name}")
    ct = compute_tl(rd)
    res = new_out(out, _shape(a, b), rd, _like(a, b))
    return run_map(binary_fn, op, ct, res, (_operand(a, ct), _operand(b, ct)))


def _compare(op: str, a: Any, b: Any, out: GPUArray | None) -> GPUArray:
    ct = compute_tl(_promote(a, b))
    res = new_out(out, _shape(a, b), as_dt("bool"), _like(a, b))
    return run_map(binary_fn, op, ct, res, (_operand(a, ct), _operand(b, ct)))


# The family's public functions (the contract in _support/signatures.py).
add = binary("add", _arith)
sub = binary("sub", _arith)
mul = binary("mul", _arith)
div = binary("div", _arith)
maximum = binary("maximum", _arith)
minimum = binary("minimum", _arith)
pow = binary("pow", _arith)
eq = compare("eq", _compare)
ne = compare("ne", _compare)
lt = compare("lt", _compare)
le = compare("le", _compare)
gt = compare("gt", _compare)
ge = compare("ge", _compare)


def where(
    cond: GPUArray, a: Any, b: Any, *, out_dtype: Any = None, out: GPUArray | None = None
) -> GPUArray:
    """cond ? a : b; each of a, b converted exactly once to the result dtype."""
    rd = _promote(a, b) if out_dtype is None else as_dt(out_dtype)
    ct = compute_tl(rd)
    res = new_out(out, _shape(cond, a, b), rd, cond)
    return run_map(_where_fn, tl_dtype(rd), ct, res, (cond, _operand(a, ct), _operand(b, ct)))


def clamp(
    x: GPUArray,
    min: Any = None,
    max: Any = None,
    *,
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """min(max(x, min), max), each bound optional (array or scalar); NaN-propagating."""
    rd = x.dtype if out_dtype is None else as_dt(out_dtype)
    ct = compute_tl(rd)
    has = (min is not None) | ((max is not None) << 1)
    lo = (0, 0) if min is None else _operand(min, ct)
    hi = (0, 0) if max is None else _operand(max, ct)
    res = new_out(out, _shape(x, min, max), rd, x)
    return run_map(_clamp_fn, has, ct, res, (x, lo, hi))
