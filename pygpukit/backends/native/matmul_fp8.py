"""gp.matmul_fp8 on cuBLASLt (the native backend's matmul_fp8; the Rust side is
rust/pygpukit-core/src/blas/fp8.rs, whose docs give the scale layouts and requirements).

The op layer (pygpukit/ops/quant.py) has validated everything and passes each operand's scale
*group* (br, bc): one scale per br x bc elements of a [M, K] / b [N, K]. Here the groups become
cuBLASLt scale modes, and operands, scales and output are brought into the form cuBLASLt's FP8
kernels need, on the device and without a host sync:

- Modes: tensor x tensor -> SCALAR_32F x SCALAR_32F; any other mix of tensor and per-row ->
  OUTER_VEC_32F for both (a per-tensor scale broadcast to a vector); anything with a block ->
  VEC128_32F (1x128) for a and BLK128x128_32F for b, or VEC128_32F for b when b's scales are
  per row or 1x128 (per-tensor and per-row scales broadcast to the block grid). Broadcasting a
  scale over a finer grid is exact: the product is the same; only cuBLASLt's pairs are used.
- Operands must be K-major with 16-byte aligned rows; other layouts are copied. N is padded to
  a multiple of 16 and, under block scaling, M to a multiple of 4 (zero rows appended to copies
  of b / a; the padded part of the result is dropped): the requirements of fp8.rs. Real models
  have N % 16 == 0 and pay nothing; an odd N copies the weight on every call.
- The result is written in place when out (or the new result) is contiguous and no padding is
  needed, else into a padded temporary whose [:M, :N] part is copied out.
- bias: fused (cuBLASLt's BIAS epilogue, added to the fp32 accumulator before the one
  rounding) for float16/bfloat16 results; a float32 result gets the bias from the ops layer
  (``Unfinished``: the routed add; cuBLASLt's FP8 bias for float32 results is bfloat16 only).
  If cuBLASLt has no fused-bias kernel for a mode pair (CUBLAS_STATUS_NOT_SUPPORTED), that pair
  is remembered and computed as a float32 product left ``Unfinished`` for the ops layer's routed
  add and cast, rounded once to the result dtype: the same numerics.
"""

from __future__ import annotations

from typing import Any

from pygpukit import _core, runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import Unfinished, deliver, target
from pygpukit.backends._support.scratch import stream_buffer
from pygpukit.backends.native.matmul import WORKSPACE_BYTES
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = ["matmul_fp8", "cublas_modes"]

_unfused_bias: set[tuple[str, ...]] = set()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def _mode(group: tuple[int, int], rows: int, k: int) -> str:
    """The scale kind of ``group`` for an operand [rows, k]: tensor, row, block1x128 or
    block128x128 (the coarsest name for the same scales)."""
    br, bc = group
    if br >= rows and bc >= k:
        return "tensor"
    if br == 1 and bc >= k:
        return "row"
    if br == 1 and bc == 128:
        return "block1x128"
    if (br, bc) == (128, 128):
        return "block128x128"
    raise ValueError(f"matmul_fp8: no cuBLASLt scale mode for groups of {group} on [{rows}, {k}]")


def cublas_modes(kind_a: str, kind_b: str) -> tuple[str, str]:
    """cuBLASLt's (A, B) = (activations, weights) modes for these scale kinds (module docs)."""
    if "block" not in kind_a and "block" not in kind_b:
        if kind_a == kind_b == "tensor":
            return "tensor", "tensor"
        return "outer", "outer"
    return "block1x128", ("block128x128" if kind_b in ("tensor", "block128x128") else "block1x128")


def _aligned(x: GPUArray) -> bool:
    return x.data_ptr() % 16 == 0


def _operand(x: GPUArray, rows_pad: int) -> tuple[GPUArray, int]:
    """x [rows, K] as cuBLASLt reads it (K-major, 16-byte aligned rows, rows_pad rows) and its
    row stride: x itself when it already is, else a copy (zero rows appended)."""
    rows, k = x._shape
    sr, sc = x._estrides
    ld = sr if rows > 1 else k
    if rows_pad == rows and sc == 1 and ld >= k and ld % 16 == 0 and _aligned(x):
        return x, ld
    buf = empty((rows_pad, k), x._dtype, x._device)
    if rows_pad > rows:
        buf[rows:].fill_(0)
    buf[:rows] = x
    return buf, k


def _f32(x: GPUArray) -> GPUArray:
    return x if x._dtype.name == "float32" else x.astype("float32")


def _vector(s: GPUArray, kind: str, rows: int, pad: int) -> GPUArray:
    """OUTER_VEC_32F scales: ``pad`` contiguous values, s per row (or broadcast)."""
    src = s.reshape(1) if kind == "tensor" else s.reshape(rows)
    if pad == rows and kind != "tensor" and src.is_contiguous() and _aligned(src):
        return src
    buf = empty((pad,), "float32", s._device)
    if pad > rows:
        buf[rows:].fill_(1.0)
    buf[:rows] = src.broadcast_to((rows,))
    return buf


def _vec128(s: GPUArray, kind: str, rows: int, pad: int, nk: int) -> GPUArray:
    """VEC128_32F scales: [nk, pad] with the rows contiguous (s is [rows, nk], per row, or one
    value, broadcast over the grid)."""
    if kind == "block1x128":
        src = s.reshape(rows, nk).T
        if pad == rows and src.is_contiguous() and _aligned(src):
            return src
    elif kind == "row":
        src = s.reshape(1, rows).broadcast_to((nk, rows))
    else:
        src = s.reshape(1, 1).broadcast_to((nk, rows))
    buf = empty((nk, pad), "float32", s._device)
    if pad > rows:
        buf[:, rows:].fill_(1.0)
    buf[:, :rows] = src
    return buf


def _blk128(s: GPUArray, kind: str, rows: int, nk: int) -> GPUArray:
    """BLK128x128_32F scales: [ceil(rows/128), round_up(nk, 4)] with the K blocks contiguous
    (s is [ceil(rows/128), nk] or one value, broadcast over the grid)."""
    nb, nk4 = _cdiv(rows, 128), _round_up(nk, 4)
    src = s.reshape(nb, nk) if kind == "block128x128" else s.reshape(1, 1).broadcast_to((nb, nk))
    if kind == "block128x128" and nk4 == nk and src.is_contiguous() and _aligned(src):
        return src
    buf = empty((nb, nk4), "float32", s._device)
    if nk4 > nk:
        buf[:, nk:].fill_(1.0)
    buf[:, :nk] = src
    return buf


def _scales(
    s: GPUArray, kind: str, mode: str, rows: int, pad: int, nk: int
) -> GPUArray:  # fmt: skip
    if mode == "tensor":
        one = s.reshape(1)
        return one if one.is_contiguous() else one.copy()
    if mode == "outer":
        return _vector(s, kind, rows, pad)
    if mode == "block1x128":
        return _vec128(s, kind, rows, pad, nk)
    return _blk128(s, kind, rows, nk)


def _call(
    a: GPUArray, lda: int, sa: GPUArray, mode_a: str,
    b: GPUArray, ldb: int, sb: GPUArray, mode_b: str,
    d: GPUArray, dt: DataType, m: int, n: int, k: int,
    bias: GPUArray | None, fast_accum: bool,
) -> None:  # fmt: skip
    dev = d._device
    stream = runtime.current_stream(dev)
    ws = stream_buffer(dev, "cublaslt", WORKSPACE_BYTES)
    # fmt: off
    _core.cublaslt_matmul_fp8(
        dev.index, stream.handle, m, n, k,
        a.data_ptr(), a._dtype.name, lda, sa.data_ptr(), mode_a,
        b.data_ptr(), b._dtype.name, ldb, sb.data_ptr(), mode_b,
        d.data_ptr(), dt.name, n, 0 if bias is None else bias.data_ptr(), fast_accum,
        ws.ptr, WORKSPACE_BYTES,
    )
    # fmt: on


def matmul_fp8(
    a: GPUArray,
    b: GPUArray,
    scale_a: GPUArray,
    scale_b: GPUArray,
    bias: GPUArray | None = None,
    *,
    out: GPUArray | None = None,
    out_dtype: Any = "bfloat16",
    groups: tuple[tuple[int, int], tuple[int, int]],
    fast_accum: bool = False,
) -> GPUArray | Unfinished:
    """(scale_a . a) @ (scale_b . b)^T (+ bias) on cuBLASLt; a [M, K], b [N, K] fp8."""
    dt = as_dtype(out_dtype)
    m, k = a._shape
    n = b._shape[0]
    dev = a._device
    if m == 0 or n == 0:
        return deliver(target(out, (m, n), dt, a), out)
    kind_a, kind_b = _mode(groups[0], m, k), _mode(groups[1], n, k)
    mode_a, mode_b = cublas_modes(kind_a, kind_b)
    blocked = mode_a.startswith("block")
    m_pad = _round_up(m, 4) if blocked else m
    n_pad = _round_up(n, 16)
    nk = _cdiv(k, 128)
    a_op, lda = _operand(a, m_pad)
    b_op, ldb = _operand(b, n_pad)
    sa = _scales(_f32(scale_a), kind_a, mode_a, m, m_pad, nk)
    sb = _scales(_f32(scale_b), kind_b, mode_b, n, n_pad, nk)

    key = (mode_a, mode_b, dt.name, a._dtype.name, b._dtype.name)
    fused = bias is not None and dt.name != "float32" and key not in _unfused_bias
    if bias is not None and not fused:
        # float32 product; the ops layer adds the bias (routed add) and rounds once to the
        # result dtype (routed cast).
        acc = empty((m_pad, n_pad), "float32", dev)
        _call(a_op, lda, sa, mode_a, b_op, ldb, sb, mode_b, acc, acc._dtype, m_pad, n_pad, k,
              None, fast_accum)  # fmt: skip
        return Unfinished(acc[:m, :n], bias, None, dt)

    res = target(out, (m, n), dt, a)
    direct = m_pad == m and n_pad == n and res.is_contiguous() and _aligned(res)
    d = res if direct else empty((m_pad, n_pad), dt, dev)
    bias_op = None
    if bias is not None:
        bias_op = bias
        if n_pad != n or not bias.is_contiguous() or not _aligned(bias):
            bias_op = empty((n_pad,), bias._dtype, dev)
            if n_pad > n:
                bias_op[n:].fill_(0)
            bias_op[:n] = bias
    try:
        _call(a_op, lda, sa, mode_a, b_op, ldb, sb, mode_b, d, dt, m_pad, n_pad, k, bias_op,
              fast_accum)  # fmt: skip
    except _core.CudaError as exc:
        if bias_op is None or getattr(exc, "name", "") != "CUBLAS_STATUS_NOT_SUPPORTED":
            raise
        _unfused_bias.add(key)
        return matmul_fp8(
            a, b, scale_a, scale_b, bias, out=out, out_dtype=dt, groups=groups,
            fast_accum=fast_accum,
        )  # fmt: skip
    if d is not res:
        res[...] = d[:m, :n]
    return deliver(res, out)
