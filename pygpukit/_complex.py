"""Complex arrays as views of float pairs: view_as_real, view_as_complex (torch's names and
rules), and the conversion between the two complex dtypes.

complex64/complex128 are storage types (pygpukit/dtypes.py, rule 7): a complex element is an
interleaved (real, imaginary) pair, so the float view [..., n, 2] shares its memory and every
float kernel (copies, casts, element-wise math) can work on it.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["complex_astype", "view_as_complex", "view_as_real"]

_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def view_as_real(z: GPUArray) -> GPUArray:
    """The float view of a complex array: ``[..., n]`` complex64/complex128 -> ``[..., n, 2]``
    float32/float64 holding (real, imaginary) pairs, sharing memory (torch's name and rule:
    any strides, the new last dim has stride 1)."""
    if not isinstance(z, GPUArray):
        raise TypeError(f"view_as_real: z must be a GPUArray, got {type(z).__name__}")
    if not z._dtype.is_complex:
        raise TypeError(
            f"view_as_real: z must be complex64 or complex128, got dtype {z._dtype.name}"
        )
    return GPUArray._make(
        z._buf,
        z._ptr,
        (*z._shape, 2),
        (*(2 * s for s in z._estrides), 1),
        2 * z._offset,
        as_dtype(_REAL_OF[z._dtype.name]),
        z._device,
        z._readonly,
    )


def view_as_complex(x: GPUArray) -> GPUArray:
    """The complex view of a float array of (real, imaginary) pairs: ``[..., n, 2]``
    float32/float64 -> ``[..., n]`` complex64/complex128, sharing memory. The last dim must
    have size 2 and stride 1, and every other stride and the start must fall on whole pairs
    (torch's rule: a complex element is one aligned 2-float unit)."""
    if not isinstance(x, GPUArray):
        raise TypeError(f"view_as_complex: x must be a GPUArray, got {type(x).__name__}")
    name = _COMPLEX_OF.get(x._dtype.name)
    if name is None:
        raise TypeError(f"view_as_complex: x must be float32 or float64, got dtype {x._dtype.name}")
    if not x._shape or x._shape[-1] != 2 or x._estrides[-1] != 1:
        raise ValueError(
            f"view_as_complex: x needs a last dim of size 2 and stride 1, got shape {x._shape} "
            f"with element strides {x._estrides}"
        )
    lead = x._estrides[:-1]
    if x._offset % 2 or any(s % 2 for s, n in zip(lead, x._shape, strict=False) if n > 1):
        raise ValueError(
            f"view_as_complex: x (shape {x._shape}, element strides {x._estrides}, offset "
            f"{x._offset}) does not start and step on whole (real, imaginary) pairs"
        )
    return GPUArray._make(
        x._buf,
        x._ptr,
        x._shape[:-1],
        tuple(s // 2 for s in lead),
        x._offset // 2,
        as_dtype(name),
        x._device,
        x._readonly,
    )


def complex_astype(a: GPUArray, dt: DataType) -> GPUArray:
    """complex64 <-> complex128 converts both parts with the routed cast; between complex and
    real no conversion is defined (it would drop or invent an imaginary part)."""
    if not (a._dtype.is_complex and dt.is_complex):
        raise TypeError(
            f"astype: no conversion between {a._dtype.name} and {dt.name}; take "
            "gp.view_as_real(z) of a complex array (or build one with gp.view_as_complex)"
        )
    from pygpukit import ops

    out = view_as_real(empty(a._shape, dt, a._device))
    ops.cast(view_as_real(a), out.dtype, out=out)
    return view_as_complex(out)
