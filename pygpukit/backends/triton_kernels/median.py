"""The 1-D median filter kernel (pygpukit/ops/median.py's contract; NumPy twin: cpu/median.py).

x is read as rows of its last dim (the op layer moves the filtered axis there as a view): up to
MAX_LEAD collapsed leading dims decomposed per row, any element strides, so a transposed or
frame-major spectrogram is read in place. One program computes a tile of BLOCK_R rows x
BLOCK_N positions; each output loads its whole window (SIZE values, padded to WP = the next
power of two) into registers, so the tile is [BLOCK_R * BLOCK_N, WP].

- Boundary: scipy.ndimage's 'reflect' (half-sample symmetric, d c b a | a b c d | d c b a).
  While the axis holds at least SIZE // 2 elements one reflection reaches every index; a shorter
  axis (WRAP) folds indices with period 2n, the repeated reflection np.pad(mode='symmetric')
  makes.
- Selection: each value becomes an unsigned integer key ordered as the floats are, -0.0 below
  +0.0 (negative numbers: every bit flipped; others: the sign bit set), padding lanes carry the
  largest key, and the key of rank SIZE // 2 is found by radix selection: BITS rounds (16, 32 or
  64 by dtype), each fixing one bit from the top by counting the window's keys below a
  threshold. That costs about BITS * SIZE compares an output (measured, the time follows SIZE
  rather than WP: size 17 takes 0.57x the time of 31 on an H100), against WP * log2(WP)**2 / 2
  compare-exchanges for a bitonic sort (tl.sort): as cheap for the common sizes, and far faster
  under Triton's interpreter (size 31 on a [5, 40] array: 4 s with tl.sort, 0.13 s here). The
  key goes back to bits; no arithmetic touches a value, so the result is one of the window's
  own values, bit for bit the NumPy twin's, in every dtype.
- NaN: a window holding a NaN gives NaN (the dtype's default quiet NaN, the bits NumPy's np.nan
  converts to), as np.median does.

Tile size: about _TILE keys a program over _WARPS warps (4096 over 128 threads: 32 keys a
thread, as many as a window of the common size 31 pads to; 128 outputs a program). Positions
along the axis come first in a tile when that axis is the contiguous one (adjacent outputs
share most of their windows, so the loads of a tile hit L1), rows first otherwise (the
frequency-axis filter of a [freq, frames] spectrogram: adjacent rows are adjacent frames,
coalesced). Measured on an H100, size 31 over [32, 1025, 1876] float32 (61.5M outputs), either
axis: 11.9 ms at 4096 keys / 4 warps and at 2048 / 2 (the same 32 keys a thread), 14.0 ms at
2048 / 4, 16.4 ms at 2048 / 8, 45 ms at 1024 / 8; torch gathering the reflected windows and
taking torch.median: 82 ms. At 4096 / 4, float16 (16 rounds) takes 7.0 ms and float64 (64
rounds) 35 ms: the rounds are the cost (compute-bound, about 40 GB/s of traffic;
benchmarks/median.py).
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    cdiv,
    new_out,
    next_pow2,
    row_offset,
    row_view,
)
from pygpukit.backends.triton_kernels.copy import contiguous, copy
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty

__all__ = ["median_filter"]

_TILE = 4096
_WARPS = 4

# Bits of each dtype's values (the width of their keys).
_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}


@triton.jit
def _to_key(v, BITS: tl.constexpr):
    """An unsigned integer whose order is the float order, -0.0 below +0.0 (negative numbers:
    every bit flipped; others: the sign bit set). 16-bit floats give keys below 2**16. (XOR with
    all ones, not ~: Triton 3.6's interpreter cannot invert unsigned integers.)"""
    if BITS == 64:
        b = v.to(tl.uint64, bitcast=True)
        key = tl.where((b >> 63) != 0, b ^ 0xFFFFFFFFFFFFFFFF, b | 0x8000000000000000)
    elif BITS == 32:
        b = v.to(tl.uint32, bitcast=True)
        key = tl.where((b >> 31) != 0, b ^ 0xFFFFFFFF, b | 0x80000000)
    else:
        b = v.to(tl.uint16, bitcast=True).to(tl.uint32)
        key = tl.where((b >> 15) != 0, b ^ 0xFFFF, b | 0x8000)
    return key


@triton.jit
def _from_key(key, dtype, BITS: tl.constexpr):
    """The inverse of _to_key."""
    if BITS == 64:
        b = tl.where((key >> 63) != 0, key & 0x7FFFFFFFFFFFFFFF, key ^ 0xFFFFFFFFFFFFFFFF)
    elif BITS == 32:
        b = tl.where((key >> 31) != 0, key & 0x7FFFFFFF, key ^ 0xFFFFFFFF)
    else:
        b = tl.where((key >> 15) != 0, key & 0x7FFF, key ^ 0xFFFF).to(tl.uint16)
    return b.to(dtype, bitcast=True)


@triton.jit
def _median_kernel(
    X, Y, R, N, D1, D2, sx0, sx1, sx2, sxn, sy0, sy1, sy2, syn, n_nb,
    SIZE: tl.constexpr, WP: tl.constexpr, BITS: tl.constexpr, NAN_KEY: tl.constexpr,
    INF_KEY: tl.constexpr, NINF_KEY: tl.constexpr, WRAP: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    rb = pid // n_nb
    nb = pid - rb * n_nb
    idx = tl.arange(0, BLOCK_R * BLOCK_N)
    r = rb * BLOCK_R + idx // BLOCK_N
    p = nb * BLOCK_N + idx % BLOCK_N
    live = (r < R) & (p < N)
    k = tl.arange(0, WP)
    j = p[:, None] + (k[None, :] - SIZE // 2)
    if WRAP:
        period = 2 * N
        j = j % period
        j = tl.where(j < 0, j + period, j)
    else:
        j = tl.where(j < 0, -1 - j, j)
    j = tl.where(j >= N, (N - 1) - (j - N), j)  # 2N - 1 - j, never forming 2N
    in_win = live[:, None] & (k < SIZE)[None, :]
    xo = row_offset(r, D1, D2, sx0, sx1, sx2)
    v = tl.load(X + xo[:, None] + j.to(tl.int64) * sxn, mask=in_win, other=0.0)
    key = _to_key(v, BITS)
    # Padding lanes get the largest key, which no threshold below exceeds, so they never count.
    if BITS == 64:
        key = tl.where(in_win, key, 0xFFFFFFFFFFFFFFFF)
        med = tl.zeros([BLOCK_R * BLOCK_N], tl.uint64)
    else:
        key = tl.where(in_win, key, 0xFFFFFFFF)
        med = tl.zeros([BLOCK_R * BLOCK_N], tl.uint32)
    # Radix selection of the key of rank SIZE // 2: the largest t with #{key < t} <= SIZE // 2,
    # built bit by bit from the top (the count only grows with t).
    for b in tl.static_range(BITS - 1, -1, -1):
        trial = med | (1 << b)
        below = tl.sum((key < trial[:, None]).to(tl.int32), axis=1)
        med = tl.where(below <= SIZE // 2, trial, med)
    is_nan = in_win & ((key < NINF_KEY) | (key > INF_KEY))  # in key space: any dtype alike
    has_nan = tl.max(is_nan.to(tl.int32), axis=1)
    med = tl.where(has_nan > 0, NAN_KEY, med)
    y = _from_key(med, Y.dtype.element_ty, BITS)
    yo = row_offset(r, D1, D2, sy0, sy1, sy2)
    tl.store(Y + yo + p.to(tl.int64) * syn, y, mask=live)


def _special_keys(np_dtype: Any, bits: int) -> tuple[int, int, int]:
    """The keys (as _to_key builds them) of the dtype's default quiet NaN (np.nan converted, as
    the NumPy twin writes), of +inf and of -inf: a value is NaN iff its key lies outside
    [key(-inf), key(+inf)]. NaN is tested and written in key space because Triton's interpreter
    neither compares nor builds bfloat16 values."""
    sign = 1 << (bits - 1)
    nan, inf = np.array([np.nan, np.inf]).astype(np_dtype).view(f"u{bits // 8}").tolist()
    return int(nan) | sign, int(inf) | sign, int(inf) ^ ((1 << bits) - 1) ^ sign


def _tile(rows: int, n: int, sxn: int, wp: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_N): positions along the axis first when it is contiguous in x."""
    block = max(1, _TILE // wp)
    if abs(sxn) <= 1:
        bn = min(next_pow2(n), block)
        return max(1, min(next_pow2(rows), block // bn)), bn
    br = min(next_pow2(rows), block)
    return br, max(1, min(next_pow2(n), block // br))


def median_filter(x: GPUArray, *, size: int, out: GPUArray | None = None) -> GPUArray:
    """The median of each window of ``size`` (odd) values along x's last axis, the axis
    extended by half-sample reflection; a window holding a NaN gives NaN."""
    y = new_out(out, x.shape, x.dtype, x)
    if y.size == 0:
        return y
    plan = row_view(x, y)
    if plan is None:
        x = contiguous(x)
        plan = row_view(x, y)
    dest = y
    if plan is None:  # out's leading dims do not decompose: write a fresh array, copy it over
        dest = empty(x.shape, x.dtype, x._device)
        plan = row_view(x, dest)
        assert plan is not None
    sizes, (sx, sy) = plan
    rows, n = sizes[0], x.shape[-1] if x.ndim else 1
    wp = next_pow2(size)
    bits = _BITS[x.dtype.name]
    nan_key, inf_key, ninf_key = _special_keys(x.dtype.np_dtype, bits)
    br, bn = _tile(rows, n, sx[3], wp)
    n_nb = cdiv(n, bn)
    launch(
        _median_kernel, (cdiv(rows, br) * n_nb,),
        x, dest, rows, n, sizes[1], sizes[2], *sx, *sy, n_nb,
        SIZE=size, WP=wp, BITS=bits, NAN_KEY=nan_key, INF_KEY=inf_key, NINF_KEY=ninf_key,
        WRAP=n < size // 2,
        BLOCK_R=br, BLOCK_N=bn, num_warps=_WARPS,
    )  # fmt: skip
    if dest is not y:
        copy(dest, out=y)
    return y
