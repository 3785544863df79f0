"""Binary arithmetic, comparisons, where and clamp on the native backend: the twins of
triton_kernels/elementwise.py, same signatures and numerics (native/src/elementwise).

Operands are GPUArrays (any strides; broadcast as stride-0 views) or scalars (Python numbers,
NumPy scalars or 0-d arrays, as the op layer passes them). Result dtypes follow the Triton twin
(the NumPy backend's promotion when no out_dtype is given); arithmetic runs in the compute dtype
of the result (float32 for half types, float64 for float64, the integer type; bool in int32,
turned back into bool by != 0) and rounds once; comparisons run in the compute dtype of the
operands' promoted type; where converts each operand exactly to the result dtype (the routed
cast) and selects raw bits. Array inputs of mixed dtypes are converted first (_map.kernel_inputs).

As the Triton twin: pow of integers with a negative exponent gives torch's values (1 for base 1,
+-1 for base -1, else 0), since a kernel cannot raise; out= may be any layout (written in place).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import as_dt, compute_name
from pygpukit.backends._support.signatures import binary, compare
from pygpukit.backends.cpu._common import float_result as np_float_result
from pygpukit.backends.cpu._common import promote as np_promote
from pygpukit.backends.native._libs import extension
from pygpukit.backends.native._map import Scalar, kernel_inputs, launch, scalar
from pygpukit.backends.native.copy import cast
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

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

# Ops whose kernels take bool operands directly (bool arithmetic is logical: or, and).
_BOOL_KERNELS = frozenset({"add", "mul", "maximum", "minimum"})
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _np_dtype(v: Any) -> np.dtype[Any]:
    if isinstance(v, GPUArray):
        return v._dtype.np_dtype
    if isinstance(v, (np.ndarray, np.generic)):
        return v.dtype
    return np.asarray(v).dtype


_promoted: dict[tuple[Any, ...], DataType] = {}


def _promote(a: Any, b: Any, div: bool = False) -> DataType:
    """The NumPy backend's default result dtype for a, b (the Triton twin's rule; cached)."""
    key = (_np_dtype(a), _np_dtype(b), div)
    rd = _promoted.get(key)
    if rd is None:
        p = np_promote(key[0], key[1])
        rd = as_dtype(np_float_result(p) if div else p)
        _promoted[key] = rd
    return rd


def _like(*vals: Any) -> GPUArray:
    for v in vals:
        if isinstance(v, GPUArray):
            return v
    raise TypeError("needs at least one GPUArray operand")


def _shape(*vals: Any) -> tuple[int, ...]:
    shapes = [v._shape for v in vals if isinstance(v, GPUArray)]
    if len(shapes) == 1 or all(s == shapes[0] for s in shapes):
        return shapes[0]
    return tuple(np.broadcast_shapes(*shapes))


def _target(out: GPUArray | None, shape: tuple[int, ...], rd: DataType, like: GPUArray) -> Any:
    return out if out is not None else empty(shape, rd, like._device)


def _run(op: str, res: GPUArray, rd: DataType, vals: list[Any], flags: int = 0) -> GPUArray:
    """res = op(vals) computed for result dtype rd (arithmetic and clamp)."""
    arrays = [v for v in vals if isinstance(v, GPUArray)]
    got = kernel_inputs(arrays, rd)
    if got is None or (rd.name == "bool" and op not in _BOOL_KERNELS):
        # A bool/fp8 result the kernels do not write directly: compute in the compute dtype,
        # then convert (bool: != 0, as the Triton twin's store; fp8: the NumPy backend's rules).
        cdt = as_dtype(compute_name(rd))
        tmp = _run(op, empty(res._shape, cdt, res._device), cdt, vals, flags)
        return cast(tmp, dtype=rd, out=res)
    in_dt, conv = got
    ct = compute_name(rd)
    it = iter(conv)
    operands = tuple(
        next(it) if isinstance(v, GPUArray) else (None if v is None else scalar(v, ct))
        for v in vals
    )
    return launch(extension().elementwise, op, in_dt.name, res, operands, flags)


def _arith(op: str, a: Any, b: Any, out_dtype: Any, out: GPUArray | None) -> GPUArray:
    rd = _promote(a, b, op == "div") if out_dtype is None else as_dt(out_dtype)
    if op == "div" and not rd.is_floating:
        raise TypeError(f"div: true division needs a floating out_dtype, got {rd.name}")
    res = _target(out, _shape(a, b), rd, _like(a, b))
    return _run(op, res, rd, [a, b])


def _compare(op: str, a: Any, b: Any, out: GPUArray | None) -> GPUArray:
    p = _promote(a, b)
    res = _target(out, _shape(a, b), as_dtype("bool"), _like(a, b))
    arrays = [v for v in (a, b) if isinstance(v, GPUArray)]
    got = kernel_inputs(arrays, p)
    assert got is not None  # p is bool only when every array is bool
    in_dt, conv = got
    ct = compute_name(in_dt)
    it = iter(conv)
    operands = tuple(next(it) if isinstance(v, GPUArray) else scalar(v, ct) for v in (a, b))
    return launch(extension().elementwise, op, in_dt.name, res, operands)


def _where_bits(v: Any, rd: DataType) -> Scalar:
    """A where scalar as the bits of rd: the value in rd's compute dtype (as the Triton twin
    passes scalars), converted to rd by the NumPy backend's rules."""
    from pygpukit.backends import cpu

    if isinstance(v, (np.ndarray, np.generic)):
        v = v.item()
    ct = np.dtype(compute_name(rd))
    with np.errstate(all="ignore"):
        val = np.asarray(v if ct.kind == "f" else int(v)).astype(ct)
        conv = cpu.cast(val, dtype=rd.np_dtype)
    bits = int(np.asarray(conv).reshape(1).view(_BITS[rd.itemsize])[0])
    return Scalar(0.0, bits - (1 << 64) if bits >= 1 << 63 else bits)


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
    res = _target(out, _shape(cond, a, b), rd, cond)
    if cond._dtype.name != "bool":
        cond = cond.astype("bool")  # != 0, the Triton twin's test
    ops: list[GPUArray | Scalar] = [
        (v if v._dtype is rd else v.astype(rd)) if isinstance(v, GPUArray) else _where_bits(v, rd)
        for v in (a, b)
    ]
    return launch(extension().elementwise, "where", rd.name, res, (cond, *ops))


def clamp(
    x: GPUArray,
    min: Any = None,
    max: Any = None,
    *,
    out_dtype: Any = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """min(max(x, min), max), each bound optional (array or scalar); NaN-propagating."""
    rd = x._dtype if out_dtype is None else as_dt(out_dtype)
    has = (min is not None) | ((max is not None) << 1)
    res = _target(out, _shape(x, min, max), rd, x)
    return _run("clamp", res, rd, [x, min, max], has)
