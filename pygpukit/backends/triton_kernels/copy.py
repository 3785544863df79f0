"""copy (strided -> any layout of the same shape) and cast (any dtype pair), on the _map engine.

``convert`` reproduces the NumPy backend's ``astype`` (NumPy + ml_dtypes on x86-64) value for
value, including the places where Triton's own conversion differs:

- float -> float8: Triton (PTX ``cvt.rn.satfinite``) saturates out-of-range values to the
  largest finite fp8; ml_dtypes rounds them to NaN (e4m3fn, which has no inf: |x| > 464, the
  midpoint above 448) or inf (e5m2: |x| >= 61440, the midpoint above 57344, rounds to even = inf).
  The kernel converts with Triton and then writes those NaN/inf bit patterns (sign kept).
- float64 -> bfloat16/float8: ml_dtypes rounds through float32 (two roundings), so the kernel
  does too; float64 -> float16 rounds once, as NumPy does (and Triton's fptrunc).
- float -> integer: C leaves NaN and out-of-range values undefined; NumPy on x86-64 converts
  through the 32-bit (64-bit for int64) cvtt instruction, which gives INT_MIN for them, and
  narrower types keep the low bits of that int32 (200.0 -> int8 gives -56, -3.7 -> uint8 253,
  NaN -> int8 0). CUDA's cvt saturates instead and maps NaN to 0; the kernel reproduces x86.
- integer -> bfloat16/float8: ml_dtypes goes through float32; the kernel does too (exact for
  |v| < 2**24, one extra rounding above, as the reference).
- -> bool: x != 0 (NaN -> True); bool -> number: 0/1.
NaN payloads are not preserved by float conversions (neither side guarantees them); copy and
same-dtype cast move bits unchanged.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import GPUArray, as_dt, compute_tl, new_out, tl_dtype
from pygpukit.backends.triton_kernels._map import run_map

__all__ = ["cast", "contiguous", "convert", "copy"]


@triton.jit
def _float_to_fp8(xf, DST: tl.constexpr):
    y = xf.to(DST)
    ax = tl.abs(xf)
    neg = xf < 0
    if DST == tl.float8e4nv:
        special = tl.where(neg, 0xFF, 0x7F).to(tl.uint8).to(DST, bitcast=True)  # NaN
        y = tl.where(ax > 464.0, special, y)
    else:
        special = tl.where(neg, 0xFC, 0x7C).to(tl.uint8).to(DST, bitcast=True)  # +-inf
        y = tl.where(ax >= 61440.0, special, y)
    return y


@triton.jit
def _to_narrow_float(xf, DST: tl.constexpr):
    """float32 -> bfloat16 / float16 / float8 with ml_dtypes' rounding and overflow rules."""
    if DST == tl.float8e4nv or DST == tl.float8e5:
        y = _float_to_fp8(xf, DST)
    else:
        y = xf.to(DST)
    return y


@triton.jit
def _float_to_int(x, DST: tl.constexpr):
    if x.dtype == tl.float64:
        xf = x
    else:
        xf = x.to(tl.float32)
    if DST == tl.int64:
        ok = (xf >= -9223372036854775808.0) & (xf < 9223372036854775808.0)
        y = tl.where(ok, xf.to(tl.int64), -9223372036854775807 - 1)
    else:
        ok = (xf >= -2147483648.0) & (xf < 2147483648.0)
        t = tl.where(ok, xf.to(tl.int32), -2147483647 - 1)
        y = t.to(DST)  # keeps the low bits, as the x86 conversion then truncation
    return y


@triton.jit
def convert(x, DST: tl.constexpr):
    """x converted to DST exactly as the NumPy backend's astype does (see the module docstring)."""
    if x.dtype == DST:
        y = x
    else:
        if x.dtype.is_fp8():
            x = x.to(tl.float32)  # exact; Triton has no fp8 compares or fp8 -> int casts
        y = _convert_from(x, DST)
    return y


@triton.jit
def _convert_from(x, DST: tl.constexpr):
    SRC: tl.constexpr = x.dtype
    if SRC == DST:
        y = x
    elif DST == tl.int1:
        y = x != 0
    elif DST.is_floating():
        if DST == tl.float64 or DST == tl.float32:
            y = x.to(DST)
        elif DST == tl.float16 and SRC == tl.float64:
            y = x.to(DST)  # one rounding, as NumPy
        else:
            y = _to_narrow_float(x.to(tl.float32), DST)
    elif SRC.is_floating():
        y = _float_to_int(x, DST)
    else:
        y = x.to(DST)  # integer/bool -> integer: sign/zero extension or truncation (wraps)
    return y


@triton.jit
def _copy_fn(a, b, c, CT: tl.constexpr, OPT: tl.constexpr):
    return a


@triton.jit
def _cast_fn(a, b, c, CT: tl.constexpr, OPT: tl.constexpr):
    return convert(a, OPT)


def copy(x: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """A copy of x (any strides, broadcast views included) into out (any layout of x's shape,
    same dtype) or a new contiguous array. Bit-exact."""
    res = new_out(out, x.shape, x.dtype, x)
    return run_map(_copy_fn, 0, tl.int32, res, (x,))


def contiguous(x: GPUArray) -> GPUArray:
    """x itself when C-contiguous, else a contiguous copy made on the device."""
    return x if x.is_contiguous() else copy(x)


def cast(x: GPUArray, *, dtype: object, out: GPUArray | None = None) -> GPUArray:
    """x converted to ``dtype`` (round to nearest even; fp8 overflow -> NaN/inf; see above).

    Supports every pair among float64/32/16, bfloat16, float8_e4m3fn/e5m2, int64/32/16/8,
    uint8 and bool (not packed int4)."""
    dt = as_dt(dtype)
    res = new_out(out, x.shape, dt, x)
    if dt is x.dtype:
        return run_map(_copy_fn, 0, tl.int32, res, (x,))
    return run_map(_cast_fn, tl_dtype(dt), compute_tl(dt), res, (x,))
