"""Weights quantized on the device for the decode GEMV formats (gp.quantize_weight): fp8 (e4m3
codes, float32 scales per output channel or per block of 128 along K), int4 (groups of 128,
scales in float32 / bfloat16 / float16) and nvfp4 (e2m1 codes, e4m3 scales per block of 16, a
float32 global scale). The results are the NumPy reference's (backends/cpu/gemv.py) bit for bit:

- every quotient and scale is computed in float64 as the reference computes it (w / scale with
  the stored scale, amax / 448, amax / 7, bmax / (6 g): IEEE division, one rounding each; the
  PTX for sm_90 has div.rn.f64);
- rounding to a narrow format (e4m3, e2m1, bfloat16 and float16 scales) is done on the float64
  value by hand (``_round_grid``: the format's grid at the value's exponent, ties to even), the
  correct rounding the reference gets from its round-to-odd step, so no conversion instruction
  of the GPU (or of the interpreter) decides a bit; codes are assembled from the rounded value's
  exponent and mantissa bits, and bfloat16 (inputs and int4 scales) travels as its 16 bits,
  widened or cut by hand (Triton 3.6's interpreter mis-converts bfloat16 subnormals);
- int4 values are the quotient rounded half to even, as NumPy's rint.

The whole-tensor maximum nvfp4's global scale needs, the NaN / inf check and int4's overflow
check come from ``weight_amax`` (per row, float64, NaN propagating): gp.quantize_weight reads it
back once a weight (load time, not a hot path) and passes the global scale in.

Kernels: ``_amax_kernel``, a program per TR rows looping over K; ``_quantize_kernel``, a
program per [TR, TC] tile (TC whole groups: the group maxima are a reshape and a max), which
writes the tile's scales and codes (two 4-bit codes a byte, the low nibble the even k).
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, tl_dtype
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.backends.triton_kernels.qgemm import _as_u8, _bytes
from pygpukit.creation import empty
from pygpukit.dtypes import as_dtype

__all__ = ["quantize_weight", "weight_amax"]

_FMT = {"fp8": 0, "w8a8": 0, "int4": 1, "nvfp4": 2}
_INT16 = as_dtype("int16")
_TR, _TC = 16, 256  # a tile of 16 rows x 256 values: two int4 / fp8 blocks, 16 nvfp4 blocks


@triton.jit
def _rne(t):
    """t >= 0 (float64, below 2^52) rounded to the nearest integer, ties to even."""
    fl = tl.floor(t)
    frac = t - fl  # exact
    odd = (fl * 0.5) != tl.floor(fl * 0.5)
    return tl.where((frac > 0.5) | ((frac == 0.5) & odd), fl + 1.0, fl)


@triton.jit
def _ilogb(a):
    """floor(log2(a)) of a float64 a > 0 (normal); -1023 for 0."""
    return ((a.to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023


@triton.jit
def _exp2i(e):
    """2^e as a float64, e an integer in the normal range."""
    return ((e + 1023) << 52).to(tl.float64, bitcast=True)


@triton.jit
def _round_grid(a, P: tl.constexpr, EMIN: tl.constexpr):
    """a >= 0 (float64) rounded to nearest, ties to even, on the grid of a binary format with P
    mantissa bits and least normal exponent EMIN (below it the subnormals' fixed step), with no
    overflow (the callers clip first). Scaling by a power of two is exact."""
    e = tl.maximum(_ilogb(a), EMIN) - P
    return _rne(a * _exp2i(-e)) * _exp2i(e)


@triton.jit
def _sign_bit(v):
    return ((v.to(tl.int64, bitcast=True) >> 63) & 1).to(tl.int32)


@triton.jit
def _e4m3_bits(r):
    """The magnitude bits of an e4m3 code for r >= 0 on e4m3's grid (at most 448)."""
    e = _ilogb(r)
    mant = ((r.to(tl.int64, bitcast=True) >> 49) & 7).to(tl.int32)
    return tl.where(e < -6, (r * 512.0).to(tl.int32), ((e + 7) << 3).to(tl.int32) | mant)


@triton.jit
def _e4m3_code(v):
    """float8_e4m3fn code of v (float64, |v| <= 448), rounded to nearest even; -0 kept."""
    return _e4m3_bits(_round_grid(tl.abs(v), 3, -6)) | (_sign_bit(v) << 7)


@triton.jit
def _e2m1_code(v):
    """fp4 e2m1 code of v (float64, |v| <= 6), rounded to nearest even; -0 kept."""
    r = _round_grid(tl.abs(v), 1, 0)
    e = _ilogb(r)
    mant = ((r.to(tl.int64, bitcast=True) >> 51) & 1).to(tl.int32)
    mag = tl.where(e < 0, (r * 2.0).to(tl.int32), ((e + 1) << 1).to(tl.int32) | mant)
    return mag | (_sign_bit(v) << 3)


@triton.jit
def _load_f64(ptr, mask, BF16: tl.constexpr):
    """Values at ptr as float64, exactly: BF16, int16 words holding bfloat16 bits."""
    if BF16:
        u = tl.load(ptr, mask=mask, other=0).to(tl.uint16, bitcast=True).to(tl.uint32)
        return (u << 16).to(tl.float32, bitcast=True).to(tl.float64)
    return tl.load(ptr, mask=mask, other=0.0).to(tl.float64)


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _amax_kernel(W, A, N, K, swn, swk, BF16: tl.constexpr, TR: tl.constexpr, TC: tl.constexpr):
    rows = tl.program_id(0) * TR + tl.arange(0, TR)
    rok = rows < N
    acc = tl.zeros([TR, TC], tl.float64)
    for c0 in range(0, K, TC):
        cols = c0 + tl.arange(0, TC)
        m = rok[:, None] & (cols < K)[None, :]
        w = _load_f64(W + rows.to(tl.int64)[:, None] * swn + cols.to(tl.int64)[None, :] * swk,
                      m, BF16)  # fmt: skip
        acc = _max_nan(acc, tl.abs(w))
    tl.store(A + rows, tl.reduce(acc, 1, _max_nan), mask=rok)


@triton.jit
def _quantize_kernel(
    W, A, Q, S, N, K, swn, swk, sqn, ssn, nb, gscale,
    FMT: tl.constexpr, G: tl.constexpr, SDT: tl.constexpr, BF16: tl.constexpr, TR: tl.constexpr,
    TC: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * TR + tl.arange(0, TR)
    c0 = tl.program_id(1) * TC
    cols = c0 + tl.arange(0, TC)
    rok = rows < N
    r64 = rows.to(tl.int64)
    m = rok[:, None] & (cols < K)[None, :]
    w = _load_f64(W + r64[:, None] * swn + cols.to(tl.int64)[None, :] * swk, m, BF16)
    if G == 0:  # fp8, one scale a row: amax / 448 as float32 (1 for a row of zeros)
        amax = tl.load(A + rows, mask=rok, other=0.0)
        s32 = tl.where(amax > 0, amax / 448.0, 1.0).to(tl.float32)
        if tl.program_id(1) == 0:
            tl.store(S + r64, s32, mask=rok)
        s_el = tl.broadcast_to(s32.to(tl.float64)[:, None], (TR, TC))
    else:
        NB: tl.constexpr = TC // G
        bmax = tl.max(tl.reshape(tl.abs(w), (TR, NB, G)), axis=2)  # zeros past K: no effect
        if FMT == 0:  # fp8 blocks of 128
            s = tl.where(bmax > 0, bmax / 448.0, 1.0).to(tl.float32).to(tl.float64)
            stored = s.to(tl.float32)
        elif FMT == 1:  # int4 groups of 128: amax / 7 rounded to the scale dtype
            a7 = tl.where(bmax > 0, bmax / 7.0, 1.0)
            if SDT == tl.float32:
                s = a7.to(tl.float32).to(tl.float64)
                stored = s.to(tl.float32)
            elif SDT == tl.bfloat16:  # stored as its bits (S: int16 words): the float32's top half
                s = _round_grid(a7, 7, -126)
                stored = (s.to(tl.float32).to(tl.uint32, bitcast=True) >> 16).to(tl.int16)
            else:
                s = _round_grid(a7, 10, -14)
                stored = s.to(tl.float32).to(tl.float16)  # exact
        else:  # nvfp4 blocks of 16: bmax / (6 g), at most 448, rounded to e4m3
            g = tl.cast(gscale, tl.float64)
            r = _round_grid(tl.minimum(bmax / (6.0 * g), 448.0), 3, -6)
            stored = _e4m3_bits(r).to(tl.uint8)
            s = r * g  # exact: 4 significant bits times float32's 24
        blk = tl.program_id(1) * NB + tl.arange(0, NB)
        tl.store(S + r64[:, None] * ssn + blk[None, :], stored,
                 mask=rok[:, None] & (blk < nb)[None, :])  # fmt: skip
        s_el = tl.reshape(tl.broadcast_to(s[:, :, None], (TR, NB, G)), (TR, TC))
    # w / scale where the scale is > 0; a scale of 0 (one that underflowed: int4's half-type
    # scales, nvfp4's e4m3 block scale, fp8's float32 one for amax below about 2^-141) gives
    # code 0
    q_ok = s_el > 0
    quot = w / tl.where(q_ok, s_el, 1.0)
    if FMT == 0:
        v = tl.where(q_ok, quot, 0.0)
        code = _e4m3_code(tl.minimum(tl.maximum(v, -448.0), 448.0))
        tl.store(Q + r64[:, None] * sqn + cols[None, :], code.to(tl.uint8), mask=m)
    else:
        if FMT == 1:
            q = _rne(tl.abs(quot))
            q = tl.where(quot < 0, -q, q)
            q = tl.where(q_ok, tl.minimum(tl.maximum(q, -8.0), 7.0), 0.0)
            nib = q.to(tl.int32) & 15
        else:
            v = tl.where(q_ok, quot, 0.0)
            nib = _e2m1_code(tl.minimum(tl.maximum(v, -6.0), 6.0))
        lo, hi = tl.split(tl.reshape(nib, (TR, TC // 2, 2)))
        byte = (lo | (hi << 4)).to(tl.uint8)
        bcol = c0 // 2 + tl.arange(0, TC // 2)
        tl.store(Q + r64[:, None] * sqn + bcol[None, :], byte,
                 mask=rok[:, None] & (bcol < K // 2)[None, :])  # fmt: skip


def _words(a: GPUArray) -> GPUArray:
    """A bfloat16 array as the int16 words it holds (the kernels widen and cut them by hand);
    any other array as it is."""
    if a.dtype.name != "bfloat16":
        return a
    return GPUArray._make(a._buf, a._ptr, a._shape, a._estrides, a._offset, _INT16, a._device)


def weight_amax(w: GPUArray, *, out: GPUArray | None = None) -> GPUArray:
    """max |w[n, :]| per row as float64 [N] (NaN where a row holds one; inf for an inf)."""
    del out
    n, k = w.shape
    a = empty((n,), "float64", w.device)
    if n:
        swn, swk = w.element_strides
        launch(_amax_kernel, (cdiv(n, _TR),), _words(w), a, n, k, swn, swk,
               BF16=w.dtype.name == "bfloat16", TR=_TR, TC=_TC, num_warps=4)  # fmt: skip
    return a


def quantize_weight(
    w: GPUArray,
    amax: GPUArray,
    *,
    format: str,
    block: int,
    scale_dtype: str,
    global_scale: float,
    out: GPUArray | None = None,
) -> tuple[GPUArray, GPUArray]:
    """(data, scales) of W [N, K] in ``format`` (module docstring); amax: weight_amax(w)."""
    del out
    n, k = w.shape
    dev = w.device
    if format in ("fp8", "w8a8"):
        data = empty((n, k), "float8_e4m3fn", dev)
        q, sqn = _as_u8(data), k
        group = block
        nb = cdiv(k, block) if block else 1
        scales = empty((n, nb) if block else (n,), "float32", dev)
        s, sdt = scales, tl.float32
    elif format == "int4":
        data = empty((n, k), "int4", dev)
        q, sqn = _bytes(data, k // 2), k // 2
        group = 128
        nb = cdiv(k, group)
        scales = empty((n, nb), scale_dtype, dev)
        s, sdt = _words(scales), tl_dtype(scales.dtype)
    else:
        data = empty((n, k // 2), "uint8", dev)
        q, sqn = data, k // 2
        group = 16
        nb = k // group
        scales = empty((n, nb), "float8_e4m3fn", dev)
        s, sdt = _as_u8(scales), tl.uint8
    g = float(global_scale)
    if float(np.float32(g)) != g:  # the kernel takes it as a float32 argument
        raise ValueError(f"quantize_weight: global_scale must be a float32 value, got {g!r}")
    if n:
        swn, swk = w.element_strides
        launch(
            _quantize_kernel, (cdiv(n, _TR), cdiv(k, _TC)),
            _words(w), amax, q, s, n, k, swn, swk, sqn, nb, nb, g,
            FMT=_FMT[format], G=group, SDT=sdt, BF16=w.dtype.name == "bfloat16", TR=_TR,
            TC=_TC, num_warps=4,
        )  # fmt: skip
    return data, scales
