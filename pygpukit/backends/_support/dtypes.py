"""The dtype rules of the GPU kernels, mirroring the NumPy backend (pygpukit/backends/cpu/
_common.py): float64 computes in float64, every other float (half types, fp8) in float32,
integers in their own type, and bool arithmetic in int32 (turned back into bool by ``!= 0``).
Results of integer inputs to float functions are float32 (torch's rule)."""

from __future__ import annotations

from typing import Any

from pygpukit.dtypes import DataType, as_dtype

__all__ = ["HALF", "as_dt", "compute_name", "float_result"]

HALF = frozenset({"float16", "bfloat16"})
_FLOAT_CT = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float32",
    "bfloat16": "float32",
}


def as_dt(dtype: Any) -> DataType:
    """A pygpukit DataType from a DataType, NumPy dtype or name (a dict lookup when cached)."""
    return dtype if isinstance(dtype, DataType) else as_dtype(dtype)


def compute_name(dt: DataType) -> str:
    """The dtype arithmetic for a result of ``dt`` runs in."""
    name = _FLOAT_CT.get(dt.name)
    if name is not None:
        return name
    if dt.is_fp8:
        return "float32"
    return "int32" if dt.name == "bool" else dt.name


def float_result(dt: DataType) -> DataType:
    """Floats keep their dtype; integers and bool give float32."""
    return dt if dt.is_floating else as_dtype("float32")
