"""Rotary position embedding on the native backend: the twin of triton_kernels/rope.py,
same signature and numerics (native/src/rope/rope.cu); out may be x itself (rope_inplace).

x and y are read and written in place when their last dim is contiguous and their dims before
[S, H, D] step uniformly (q as a head slice of a fused qkv buffer, a KV-cache window): a token
is addressed by (b, s) with one stride each, a head by its own stride. Other layouts are copied
first (x) or written through a contiguous temporary (out=). Positions are read in place the same
way (int32/int64; other integer types are converted to int64). The cos/sin tables are read in
place with any strides when they are of x's dtype or float32; tables of another dtype are
converted to x's compute type first (exact for the half types; float64 tables of a float32 x
round exactly as the Triton kernel's load does).
"""

from __future__ import annotations

from pygpukit._layout import single_stride
from pygpukit.array import GPUArray
from pygpukit.backends._support.dtypes import compute_name
from pygpukit.backends._support.output import deliver
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty

__all__ = ["rope"]

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})


def _tokens(a: GPUArray) -> tuple[int, int, int] | None:
    """(sb, ss, sh): element strides of the flat leading dims, the S dim and the H dim of an
    [..., S, H, D] array with D contiguous; size-1 dims get stride 0. None otherwise."""
    shape, st = a._shape, a._estrides
    if shape[-1] > 1 and st[-1] != 1:
        return None
    sb = single_stride(shape[:-3], st[:-3])
    if sb is None:
        return None
    ss = st[-3] if shape[-3] > 1 else 0
    sh = st[-2] if shape[-2] > 1 else 0
    return sb, ss, sh


def _positions(pos: GPUArray) -> tuple[GPUArray, int, int]:
    """(positions, sb, ss) of positions broadcast to x.shape[:-2], as int32/int64."""
    if pos._dtype.name not in ("int32", "int64"):
        pos = pos.astype("int64")
    sb = single_stride(pos._shape[:-1], pos._estrides[:-1])
    if sb is None:
        pos = pos.contiguous()
        sb = single_stride(pos._shape[:-1], pos._estrides[:-1])
        assert sb is not None
    ss = pos._estrides[-1] if pos._shape[-1] > 1 else 0
    return pos, sb, ss


def rope(
    x: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    positions: GPUArray | None = None,
    *,
    style: str = "neox",
    rotary_dim: int | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """x rotated by the table rows at ``positions``; out may be x itself (in place)."""
    if style not in ("neox", "gptj"):
        raise ValueError(f"rope: style must be 'neox' or 'gptj', got {style!r}")
    if x._dtype.name not in _FLOATS:
        raise TypeError(f"rope: the native kernel rotates float arrays, not {x._dtype.name}")
    shape = x._shape
    d = shape[-1]
    r = d if rotary_dim is None else int(rotary_dim)
    if out is not None and out._dtype is not x._dtype:
        raise TypeError(f"rope: out is {out._dtype.name} but x is {x._dtype.name}")
    y = out if out is not None else empty(shape, x._dtype, x._device)
    lead = shape[:-2]
    h = shape[-2]
    ntok = 1
    for v in lead:
        ntok *= v
    if ntok == 0 or h == 0 or d == 0:
        return y
    tx = _tokens(x)
    if tx is None:
        x = x.contiguous()
        tx = _tokens(x)
        assert tx is not None
    ty = _tokens(y)
    target = y
    if ty is None:
        target = empty(shape, x._dtype, x._device)
        ty = _tokens(target)
        assert ty is not None
    # In place when the kernel writes exactly where it reads: the pass-through dims are there.
    in_place = target.data_ptr() == x.data_ptr() and ty == tx
    pos_ptr, pos_dt, spb, sps = 0, "int64", 0, 0
    if positions is not None:
        pos, spb, sps = _positions(positions.broadcast_to(lead))
        pos_ptr, pos_dt = pos.data_ptr(), pos._dtype.name
    xdt = x._dtype
    if cos._dtype is not sin._dtype or cos._dtype.name not in (xdt.name, "float32"):
        ct = compute_name(xdt)
        cos, sin = cos.astype(ct), sin.astype(ct)
    # fmt: off
    extension().rope(
        x._device.index, stream_of(x), xdt.name, cos._dtype.name, pos_dt,
        ntok, shape[-3], h, d, r // 2,
        x.data_ptr(), *tx, target.data_ptr(), *ty, pos_ptr, spb, sps,
        cos.data_ptr(), sin.data_ptr(), cos._shape[0], *cos._estrides, *sin._estrides,
        style == "gptj", not in_place,
    )
    # fmt: on
    return deliver(target, y)
