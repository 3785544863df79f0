"""The STFT synthesis steps of pygpukit/ops/spectral.py, one pass each.

phase_project: each program reads a block of z's and prev's (re, im) pairs and of the magnitudes
and writes the projected pairs, computing in float64 as the NumPy reference does (rounded once to
the result's dtype; products may contract to fused multiply-adds).

overlap_add: each program owns a block of output samples of one row and sums, for each, the
frames covering it (at most R = ceil(n / hop)), in increasing frame order as the NumPy reference
does (the window's product may contract into the sum as a fused multiply-add, the last bit where
NumPy rounds twice): frame f = q // hop - (R - 1) + r for r = 0 .. R - 1 (q = s + start),
masked where it does not exist or does not reach q. For a block of consecutive samples each r
reads consecutive values of one or two frames (coalesced). The window multiplies each value as
it loads, the envelope the sum; nothing is written but the result (the element-wise version
wrote a zeroed grid, ceil(n / hop) strided sums and two products)."""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit._complex import view_as_real
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver
from pygpukit.backends.triton_kernels._common import cdiv, scalar_bits, scalar_value
from pygpukit.backends.triton_kernels.copy import contiguous
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty

__all__ = ["overlap_add", "phase_project"]

_BLOCK = 1024


@triton.jit(do_not_specialize=["ch", "cl", "eh", "el"])
def _phase_project(Z, M, P, Y, n, ch, cl, eh, el, HAS_PREV: tl.constexpr, BLOCK: tl.constexpr):
    """Every value in float64 (as the NumPy reference): |est|^2 of float32 values neither
    overflows nor underflows there, and the pass stays memory-bound. c and eps arrive as
    scalar_bits halves of their float64 values (a float argument would pass as float32)."""
    c = scalar_value(ch, cl, tl.float64)
    eps = scalar_value(eh, el, tl.float64)
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    re = tl.load(Z + 2 * i, mask=mask, other=0.0).to(tl.float64)
    im = tl.load(Z + 2 * i + 1, mask=mask, other=0.0).to(tl.float64)
    if HAS_PREV:
        re = re - c * tl.load(P + 2 * i, mask=mask, other=0.0).to(tl.float64)
        im = im - c * tl.load(P + 2 * i + 1, mask=mask, other=0.0).to(tl.float64)
    mag = tl.load(M + i, mask=mask, other=0.0).to(tl.float64)
    s = mag / (tl.sqrt(re * re + im * im) + eps)  # IEEE in float64
    tl.store(Y + 2 * i, (re * s).to(Y.dtype.element_ty), mask=mask)
    tl.store(Y + 2 * i + 1, (im * s).to(Y.dtype.element_ty), mask=mask)


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
    zc, mc = z.contiguous(), magnitude.contiguous()  # GPUArray's: complex-aware copies
    pc = zc if prev is None else prev.contiguous()
    y = out if out is not None and out.is_contiguous() else empty(z.shape, z.dtype, z.device)
    n = z.size
    if n:
        f64 = tl.float64
        launch(_phase_project, (cdiv(n, _BLOCK),), view_as_real(zc), mc, view_as_real(pc),
               view_as_real(y), n, *scalar_bits(prev_scale, f64), *scalar_bits(eps, f64),
               HAS_PREV=prev is not None, BLOCK=_BLOCK)  # fmt: skip
    return deliver(y, out)


_OLA_BLOCK = 512


@triton.jit
def _overlap_add(
    X, W, E, Y, n_frames, n, hop, start, length, blocks, sxb, sxf, sxe, syb, sye, R,
    WINDOWED: tl.constexpr, ENVELOPED: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    # A 1-D grid of (row, block) pairs: no 65535 limit on the rows.
    pid = tl.program_id(0).to(tl.int64)
    b = pid // blocks
    s = (pid % blocks) * BLOCK + tl.arange(0, BLOCK)
    live = s < length
    q = s + start
    last = q // hop  # the last frame starting at or before q
    acc = tl.zeros([BLOCK], dtype=Y.dtype.element_ty)
    for r in tl.range(0, R):
        f = last - (R - 1) + r
        j = q - f * hop  # >= 0: f <= last
        ok = live & (f >= 0) & (f < n_frames) & (j < n)
        v = tl.load(X + b * sxb + f * sxf + j * sxe, mask=ok, other=0.0)
        if WINDOWED:
            v = v * tl.load(W + j, mask=ok, other=0.0)
        acc += v
    if ENVELOPED:
        acc = acc * tl.load(E + s, mask=live, other=0.0)
    tl.store(Y + b * syb + s * sye, acc, mask=live)


def overlap_add(
    frames: GPUArray,
    *extra: GPUArray,
    hop: int,
    start: int,
    length: int,
    windowed: bool,
    enveloped: bool,
    out: GPUArray | None = None,
) -> GPUArray:
    """sum_f frames[:, f] * window placed hop apart over [start, start + length), times the
    envelope; extra: the window and / or the envelope as the flags say. frames any strides;
    out any layout (its own strides are written)."""
    rest = list(extra)
    win = contiguous(rest.pop(0)) if windowed else frames
    env = contiguous(rest.pop(0)) if enveloped else frames
    b, nf, n = frames.shape
    y = out if out is not None else empty((b, length), frames.dtype, frames.device)
    if b and length:
        sxb, sxf, sxe = frames.element_strides
        syb, sye = y.element_strides
        blocks = cdiv(length, _OLA_BLOCK)
        launch(_overlap_add, (b * blocks,), frames, win, env, y, nf, n, hop, start, length,
               blocks, sxb, sxf, sxe, syb, sye, cdiv(n, hop), WINDOWED=windowed,
               ENVELOPED=enveloped, BLOCK=_OLA_BLOCK)  # fmt: skip
    return y
