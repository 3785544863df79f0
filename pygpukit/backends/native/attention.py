"""sdpa and sdpa_varlen on the native backend: the twins of triton_kernels/attention.py,
same signatures and numerics (pygpukit/backends/cpu/attention.py), kernel in
native/src/attention/attn_rows.cuh (one warp per query row, online softmax in float32, float64
for float64, one rounding at the store).

Every operand is read and out is written through its element strides, so [B, H, S, D] memory,
[B, S, H, D] memory passed as a transposed view, and head slices of a fused QKV buffer all run
without copies; a non-contiguous out= is written in place. Serves float16, bfloat16, float32 and
float64 (the Triton kernel has no float64) with head dims up to 256 (q/k and v alike).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pygpukit.array import GPUArray
from pygpukit.backends.native._common import stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty

if TYPE_CHECKING:
    from pygpukit.backends.triton_kernels.attention import AttnConfig

__all__ = ["MAX_HEAD_DIM", "check_operands", "sdpa", "sdpa_varlen"]

MAX_HEAD_DIM = 256  # native/src/attention/attention.h kMaxHeadDim
_DTYPES = ("float32", "float16", "bfloat16", "float64")


def check_operands(op: str, q: GPUArray, k: GPUArray, v: GPUArray) -> None:
    """What the kernel needs beyond the ops layer's checks (which the routing table's
    constraints mirror): a served dtype shared by q, k, v and head dims within MAX_HEAD_DIM."""
    if q.dtype.name not in _DTYPES:
        served = ", ".join(_DTYPES)
        raise TypeError(f"{op} (native): dtype {q.dtype.name} is not supported ({served})")
    for name, t in (("k", k), ("v", v)):
        if t.dtype is not q.dtype:
            raise TypeError(f"{op} (native): {name} is {t.dtype.name} but q is {q.dtype.name}")
    for name, t in (("q", q), ("v", v)):
        if t.shape[-1] > MAX_HEAD_DIM:
            raise ValueError(
                f"{op} (native): {name} has head dim {t.shape[-1]}, more than {MAX_HEAD_DIM}"
            )


def _dims(a: GPUArray) -> tuple[int, int, int, int]:
    """(batch, head, position, dim) element strides of [B, H, S, D] or [H, S, D]."""
    st = tuple(a.element_strides)
    return (st[0], st[1], st[2], st[3]) if a.ndim == 4 else (0, st[0], st[1], st[2])


def _tok_dims(a: GPUArray) -> tuple[int, int, int, int]:
    """Packed [T, H, D] as (unit, head, position, dim) strides: positions are packed tokens."""
    st = a.element_strides
    return (0, st[1], st[0], st[2])


def _scale(d: int, scale: float | None) -> float:
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def sdpa(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    *,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """Attention of q [B, H, Sq, D] over k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] -> [B, H, Sq, Dv]
    (or the same without B); written into out= when given."""
    check_operands("sdpa", q, k, v)
    shape = (*q.shape[:-1], v.shape[-1])
    o = out if out is not None else empty(shape, q.dtype, q.device)
    batch = q.shape[0] if q.ndim == 4 else 1
    h, sq, d = q.shape[-3], q.shape[-2], q.shape[-1]
    hkv, sk, dv = k.shape[-3], k.shape[-2], v.shape[-1]
    if batch * h * sq * dv == 0:
        return o
    # fmt: off
    extension().sdpa(
        q.device.index, stream_of(q), q.dtype.name, "dense", batch, h, hkv, sq, sk, d, dv,
        q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
        _dims(q), _dims(k), _dims(v), _dims(o), 0, 0, 0, 0, _scale(d, scale), bool(causal),
    )
    # fmt: on
    return o


def sdpa_varlen(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    cu_seqlens_q: GPUArray,
    cu_seqlens_k: GPUArray,
    *,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
    config: AttnConfig | None = None,
) -> GPUArray:
    """Packed variable-length attention: q [total_q, H, D], k [total_k, Hkv, D],
    v [total_k, Hkv, Dv], int32 cu_seqlens [B + 1] on the device -> [total_q, H, Dv].
    max_seqlen_q sizes the grid (rows past a sequence's length exit at once); the key lengths
    are read on the device, so max_seqlen_k is not needed. config is the Triton kernel's launch
    configuration: the native kernel has none and takes only None."""
    if config is not None:
        raise ValueError("sdpa_varlen (native): config= is a Triton launch configuration")
    check_operands("sdpa_varlen", q, k, v)
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if cu.dtype.name != "int32" or cu.ndim != 1:
            raise TypeError(f"sdpa_varlen (native): {name} must be a 1-D int32 array")
    o = out if out is not None else empty((*q.shape[:-1], v.shape[-1]), q.dtype, q.device)
    units = cu_seqlens_q.shape[0] - 1
    h, d = q.shape[1], q.shape[2]
    hkv, dv = k.shape[1], v.shape[2]
    if units <= 0 or max_seqlen_q <= 0 or q.shape[0] * h * dv == 0:
        return o
    # fmt: off
    extension().sdpa(
        q.device.index, stream_of(q), q.dtype.name, "varlen", units, h, hkv, int(max_seqlen_q),
        0, d, dv, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
        _tok_dims(q), _tok_dims(k), _tok_dims(v), _tok_dims(o),
        cu_seqlens_q.data_ptr(), cu_seqlens_q.element_strides[0],
        cu_seqlens_k.data_ptr(), cu_seqlens_k.element_strides[0], _scale(d, scale), bool(causal),
    )
    # fmt: on
    return o
