"""phase_project (pygpukit/ops/spectral.py) in one pass: each program reads a block of z's and
prev's (re, im) pairs and of the magnitudes and writes the projected pairs, in fp32 with
correctly rounded square root and division (NumPy's; Triton's plain sqrt and '/' may be
approximate). est = z - c prev may contract to one fused multiply-add."""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit._complex import view_as_complex, view_as_real
from pygpukit.array import GPUArray
from pygpukit.backends.triton_kernels._common import cdiv, scalar_bits, scalar_value
from pygpukit.backends.triton_kernels.copy import contiguous, copy
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import complex128

__all__ = ["phase_project"]

_BLOCK = 1024


@triton.jit(do_not_specialize=["ch", "cl", "eh", "el"])
def _phase_project(
    Z, M, P, Y, n, ch, cl, eh, el, HAS_PREV: tl.constexpr, CT: tl.constexpr, BLOCK: tl.constexpr
):
    """The scalars c and eps arrive as scalar_bits halves: exact in float64 too (a float
    argument is passed as float32)."""
    c = scalar_value(ch, cl, CT)
    eps = scalar_value(eh, el, CT)
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    re = tl.load(Z + 2 * i, mask=mask, other=0.0)
    im = tl.load(Z + 2 * i + 1, mask=mask, other=0.0)
    if HAS_PREV:
        re = re - c * tl.load(P + 2 * i, mask=mask, other=0.0)
        im = im - c * tl.load(P + 2 * i + 1, mask=mask, other=0.0)
    mag = tl.load(M + i, mask=mask, other=0.0)
    if CT == tl.float32:  # correctly rounded (plain sqrt and '/' are approximate in fp32)
        s = tl.div_rn(mag, tl.sqrt_rn(re * re + im * im) + eps)
    else:  # fp64 sqrt and division are IEEE
        s = mag / (tl.sqrt(re * re + im * im) + eps)
    tl.store(Y + 2 * i, re * s, mask=mask)
    tl.store(Y + 2 * i + 1, im * s, mask=mask)


def phase_project(
    z: GPUArray,
    magnitude: GPUArray,
    prev: GPUArray | None = None,
    *,
    prev_scale: float,
    eps: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """est * (magnitude / (|est| + eps)), est = z - prev_scale * prev (complex64 z and prev
    with float32 magnitude, or complex128 with float64); any layout in (contiguous copies
    where needed), out any layout."""
    # Copies go through the (re, im) float views: the copy kernel moves floats, not pairs.
    zf = contiguous(view_as_real(z))
    mf = contiguous(magnitude)
    pf = zf if prev is None else contiguous(view_as_real(prev))
    direct = out if out is not None and out.is_contiguous() else None
    yf = view_as_real(direct) if direct is not None else empty((*z.shape, 2), zf.dtype, z.device)
    n = z.size
    if n:
        ct = tl.float64 if z.dtype is complex128 else tl.float32
        launch(_phase_project, (cdiv(n, _BLOCK),), zf, mf, pf, yf, n,
               *scalar_bits(prev_scale, ct), *scalar_bits(eps, ct), HAS_PREV=prev is not None,
               CT=ct, BLOCK=_BLOCK)  # fmt: skip
    if direct is not None:
        return direct
    if out is None:
        return view_as_complex(yf)
    copy(yf, out=view_as_real(out))
    return out
