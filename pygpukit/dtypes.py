"""Data types of GPUArray and the promotion rules between them.

A ``DataType`` names one element type. ``str(dt)`` is ``"pygpukit.<name>"`` whose last dotted part
is the torch-style name (``float32``, ``bfloat16``, ``float8_e4m3fn`` ...): Triton canonicalises an
argument's dtype by exactly that suffix, so a GPUArray is accepted by Triton kernels as is.

bfloat16 and the float8 formats live on the host as ``ml_dtypes`` types (a maintained package used
by JAX/TensorFlow), never as hand-rolled bit tricks. ``int4`` is a packed storage type: two values a
byte, low nibble first (the layout of GGUF/AWQ-style 4-bit weights); it supports storage,
views along leading dims and host round trips, not arithmetic.

Promotion (``result_type``), documented here and tested in tests/test_dtypes.py:

1. Same dtype -> that dtype.
2. Kinds are ordered bool < integer < floating. Mixed kinds -> the operand of the higher kind
   (``int32 + float16 -> float16``, ``bool + int8 -> int8``).
3. Two integers: the wider one; signed with unsigned of the same or greater width goes to the next
   signed width (``uint8 + int8 -> int16``), as in NumPy.
4. Two floats: the wider one; ``float16 + bfloat16 -> float32`` (neither holds the other).
5. Python scalars are *weak* (torch / NumPy 2 semantics): they never widen an array's dtype within
   its kind. ``bool`` array with an ``int`` scalar -> int64; ``bool``/integer array with a ``float``
   scalar -> float32; a float array keeps its dtype. An integer scalar that does not fit the
   array's integer dtype raises ValueError.
6. float8 and int4 are storage formats: any arithmetic promotion involving them raises TypeError;
   cast them explicitly (``x.astype(gp.float32)``).
7. complex64 and complex128 (interleaved real/imaginary pairs, NumPy's and torch's layout) are
   storage types too: the results of ``gp.fft`` and the inputs of its inverses. Arithmetic
   promotion involving them raises TypeError naming the dtype; compute on the float view
   ``gp.view_as_real(z)`` (``[..., n, 2]``, zero-copy) and view back with ``gp.view_as_complex``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "DataType",
    "as_dtype",
    "result_type",
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool_",
    "int4",
    "complex64",
    "complex128",
    "ALL_DTYPES",
]

# DLPack type codes (dlpack.h, v1.1): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6,
# kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12, kDLComplex 5 (bits of the whole pair: 64 = complex64).
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6
_DL_COMPLEX = 5
_DL_F8_E4M3FN, _DL_F8_E5M2 = 10, 12


class DataType:
    """One element type. Instances are singletons: compare with ``is`` or ``==``."""

    __slots__ = ("_rank", "bits", "dlpack", "kind", "name", "np_dtype", "typestr")

    def __init__(
        self,
        name: str,
        bits: int,
        kind: str,
        np_dtype: Any,
        dlpack: tuple[int, int],
        typestr: str | None,
        rank: int,
    ) -> None:
        self.name = name
        self.bits = bits
        # "b" bool, "i" signed, "u" unsigned, "f" float, "f8" float8, "q" packed, "c" complex
        self.kind = kind
        self.np_dtype = np.dtype(np_dtype)
        self.dlpack = dlpack  # (type code, bits)
        self.typestr = typestr  # __cuda_array_interface__ typestr; None where none exists
        self._rank = rank

    @property
    def itemsize(self) -> int:
        """Bytes per element; packed int4 reports 1 (see ``bits`` for the real size)."""
        return max(1, self.bits // 8)

    @property
    def is_floating(self) -> bool:
        return self.kind in ("f", "f8")

    @property
    def is_integer(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_fp8(self) -> bool:
        return self.kind == "f8"

    @property
    def is_packed(self) -> bool:
        return self.kind == "q"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    def __str__(self) -> str:
        return f"pygpukit.{self.name}"

    def __repr__(self) -> str:
        return f"pygpukit.{self.name}"

    def __reduce__(self) -> str:
        return self.name if self.name != "bool" else "bool_"


float64 = DataType("float64", 64, "f", np.float64, (_DL_FLOAT, 64), "<f8", 3)
float32 = DataType("float32", 32, "f", np.float32, (_DL_FLOAT, 32), "<f4", 2)
float16 = DataType("float16", 16, "f", np.float16, (_DL_FLOAT, 16), "<f2", 1)
bfloat16 = DataType("bfloat16", 16, "f", ml_dtypes.bfloat16, (_DL_BFLOAT, 16), None, 1)
float8_e4m3fn = DataType(
    "float8_e4m3fn", 8, "f8", ml_dtypes.float8_e4m3fn, (_DL_F8_E4M3FN, 8), None, 0
)
float8_e5m2 = DataType("float8_e5m2", 8, "f8", ml_dtypes.float8_e5m2, (_DL_F8_E5M2, 8), None, 0)
int64 = DataType("int64", 64, "i", np.int64, (_DL_INT, 64), "<i8", 3)
int32 = DataType("int32", 32, "i", np.int32, (_DL_INT, 32), "<i4", 2)
int16 = DataType("int16", 16, "i", np.int16, (_DL_INT, 16), "<i2", 1)
int8 = DataType("int8", 8, "i", np.int8, (_DL_INT, 8), "|i1", 0)
uint8 = DataType("uint8", 8, "u", np.uint8, (_DL_UINT, 8), "|u1", 0)
bool_ = DataType("bool", 8, "b", np.bool_, (_DL_BOOL, 8), "|b1", 0)
int4 = DataType("int4", 4, "q", ml_dtypes.int4, (_DL_INT, 4), None, 0)
# rank: that of the float type of each half (complex64 <-> float32), as view_as_real pairs them.
complex64 = DataType("complex64", 64, "c", np.complex64, (_DL_COMPLEX, 64), "<c8", 2)
complex128 = DataType("complex128", 128, "c", np.complex128, (_DL_COMPLEX, 128), "<c16", 3)

ALL_DTYPES: tuple[DataType, ...] = (
    float64,
    float32,
    float16,
    bfloat16,
    float8_e4m3fn,
    float8_e5m2,
    int64,
    int32,
    int16,
    int8,
    uint8,
    bool_,
    int4,
    complex64,
    complex128,
)

_BY_KEY: dict[Any, DataType] = {}
for _dt in ALL_DTYPES:
    _BY_KEY[_dt] = _dt
    _BY_KEY[_dt.name] = _dt
    _BY_KEY[str(_dt)] = _dt
    _BY_KEY[_dt.np_dtype] = _dt
_ALIASES = {
    "fp64": float64,
    "double": float64,
    "fp32": float32,
    "float": float32,
    "fp16": float16,
    "half": float16,
    "bf16": bfloat16,
    "fp8": float8_e4m3fn,
    "fp8_e4m3": float8_e4m3fn,
    "float8_e4m3": float8_e4m3fn,
    "fp8_e5m2": float8_e5m2,
    "bool_": bool_,
    "i64": int64,
    "i32": int32,
    "i16": int16,
    "i8": int8,
    "u8": uint8,
    "cfloat": complex64,
    "cdouble": complex128,
    bool: bool_,
}
_BY_KEY.update(_ALIASES)
_BY_DLPACK = {dt.dlpack: dt for dt in ALL_DTYPES}


def as_dtype(dtype: Any) -> DataType:
    """Resolve a DataType, a name ("bfloat16", "bf16", ...), a NumPy dtype or a torch dtype."""
    try:
        return _BY_KEY[dtype]
    except (KeyError, TypeError):
        pass
    if isinstance(dtype, str):
        raise TypeError(
            f"unknown dtype {dtype!r}; valid names: {', '.join(d.name for d in ALL_DTYPES)}"
        )
    # torch.dtype and similar objects print as "<module>.<name>".
    tail = str(dtype).split(".")[-1]
    if type(dtype).__name__ == "dtype" and tail in _BY_KEY:
        return _BY_KEY[tail]
    try:
        return _BY_KEY[np.dtype(dtype)]
    except (KeyError, TypeError) as exc:
        raise TypeError(f"unsupported dtype {dtype!r}") from exc


def from_dlpack_code(code: int, bits: int, lanes: int) -> DataType:
    if lanes != 1 or (code, bits) not in _BY_DLPACK:
        raise TypeError(f"unsupported DLPack dtype (code={code}, bits={bits}, lanes={lanes})")
    return _BY_DLPACK[(code, bits)]


_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2}
_SIGNED_BY_RANK = (int8, int16, int32, int64)
_FLOAT_BY_RANK = {1: float16, 2: float32, 3: float64}
_COMPLEX_HINT = "compute on gp.view_as_real(z) and view back with gp.view_as_complex"


def _promote(a: DataType, b: DataType) -> DataType:
    if a is b:
        if a.kind in ("f8", "q"):
            raise TypeError(
                f"no arithmetic on storage type {a.name}; cast first, e.g. x.astype(gp.float32)"
            )
        if a.kind == "c":
            raise TypeError(f"no arithmetic on storage type {a.name}; {_COMPLEX_HINT}")
        return a
    for dt in (a, b):
        if dt.kind in ("f8", "q"):
            raise TypeError(
                f"cannot promote {a.name} with {b.name}: {dt.name} is a storage type; "
                "cast it explicitly first"
            )
        if dt.kind == "c":
            raise TypeError(
                f"cannot promote {a.name} with {b.name}: {dt.name} is a storage type; "
                + _COMPLEX_HINT
            )
    ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
    if ka != kb:
        return a if ka > kb else b
    if a.kind == "f":
        if a._rank == b._rank:  # float16 vs bfloat16
            return float32
        return a if a._rank > b._rank else b
    # integers
    if a.kind == b.kind:
        return a if a._rank > b._rank else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed._rank > unsigned._rank:
        return signed
    return _SIGNED_BY_RANK[min(unsigned._rank + 1, 3)]


def _promote_scalar(arr: DataType, value: object) -> DataType:
    if arr.kind in ("f8", "q"):
        raise TypeError(f"no arithmetic on storage type {arr.name}; cast first")
    if arr.kind == "c":
        raise TypeError(f"no arithmetic on storage type {arr.name}; {_COMPLEX_HINT}")
    if isinstance(value, bool):
        return arr
    if isinstance(value, int):
        if arr.kind == "b":
            return int64
        if arr.is_integer:
            info = np.iinfo(arr.np_dtype)
            if not info.min <= value <= info.max:
                raise ValueError(f"scalar {value} does not fit dtype {arr.name}")
        return arr
    if isinstance(value, float):
        return arr if arr.kind == "f" else float32
    raise TypeError(f"unsupported scalar operand of type {type(value).__name__}")


def result_type(a: Any, b: Any) -> DataType:
    """Dtype of a binary op between arrays (anything with a ``dtype``) and/or Python scalars."""
    a_dt = getattr(a, "dtype", None)
    b_dt = getattr(b, "dtype", None)
    if a_dt is not None and b_dt is not None:
        return _promote(as_dtype(a_dt), as_dtype(b_dt))
    if a_dt is not None:
        return _promote_scalar(as_dtype(a_dt), b)
    if b_dt is not None:
        return _promote_scalar(as_dtype(b_dt), a)
    raise TypeError("result_type needs at least one array operand")
