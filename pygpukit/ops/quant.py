"""FP8: scaled matrix products (matmul_fp8) and amax-based quantize/dequantize.

Scales are dequantization multipliers (x ~= q * scale), one fp32 value per group of elements;
the scale's shape says the group:

- matmul_fp8(a, b, scale_a=, scale_b=): a [M, K] activations, b [N, K] weights (stored
  [out_features, in_features], as linear), result [M, N] = (scale_a . a) @ (scale_b . b)^T.
  scale_a: () / (1,) / (1, 1) per tensor; (M,) / (M, 1) per row; (M, ceil(K/128)) per 1x128
  block. scale_b: per tensor; (N,) / (N, 1) per row of b (column of the result);
  (ceil(N/128), ceil(K/128)) per 128x128 block (DeepSeek-V3's weight_scale_inv); (N,
  ceil(K/128)) per 1x128 block. Any strides. Numerics: fp32 accumulation (tensor-core FP8
  products with periodic fp32 promotion; ``fast_accum=True`` opts into the tensor cores'
  faster, less precise accumulation, per-tensor and per-row scales only), one rounding to
  ``out_dtype`` (bfloat16, float16 or float32), the bias added before it.
- quantize_fp8(x, dtype, granularity=, block=) -> (q, scale): "tensor" (scale (1,)), "row"
  (scale x.shape[:-1] + (1,)), "block": block=b for 1 x b blocks along the last dim (scale
  x.shape[:-1] + (ceil(C/b),)), block=(br, bc) for 2-D blocks of a 2-D x (scale (ceil(R/br),
  ceil(C/bc))). scale = amax / fp8_max per group (1.0 for a group of zeros), q = x / scale
  saturated to the fp8 range (e4m3fn 448, e5m2 57344), rounded to nearest even.
- dequantize_fp8(q, scale, out_dtype=, block=): q * scale rounded once; the scale shape as
  quantize_fp8 returns it (block= as given to quantize_fp8 for block scales).

Everything is checked here before any GPU work; numerics in pygpukit/backends/cpu/quant.py.
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType, as_dtype
from pygpukit.ops import _checks as chk
from pygpukit.ops._epilogue import finish
from pygpukit.routing.dispatch import run

__all__ = ["matmul_fp8", "quantize_fp8", "dequantize_fp8"]

_RESULTS = ("bfloat16", "float16", "float32")
_SOURCES = ("float32", "float16", "bfloat16")
Group = tuple[int, int]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _fp8_dtype(op: str, name: str, dtype: Any) -> DataType:
    try:
        dt = as_dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or not dt.is_fp8:
        raise ValueError(f"{op}: {name} must be float8_e4m3fn or float8_e5m2, got {dtype!r}")
    return dt


def _result_dtype(op: str, out_dtype: Any) -> DataType:
    try:
        dt = as_dtype(out_dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.name not in _RESULTS:
        raise ValueError(f"{op}: out_dtype must be one of {_RESULTS}, got {out_dtype!r}")
    return dt


def _scale_array(op: str, name: str, s: Any) -> GPUArray:
    chk.array(op, name, s)
    if s.dtype.name != "float32":
        raise TypeError(f"{op}: {name} must be a float32 array, got {chk.desc(s)}")
    return s  # type: ignore[no-any-return]


def _operand_group(
    op: str, name: str, s: GPUArray, rows: int, k: int, blocks: tuple[Group, ...], what: str
) -> Group:
    """The (br, bc) group of a matmul_fp8 scale from its shape (per tensor, per row, blocks)."""
    shape = s.shape
    if s.size == 1 and s.ndim <= 2:
        return (max(rows, 1), k)
    if shape in ((rows,), (rows, 1)):
        return (1, k)
    for br, bc in blocks:
        if s.ndim == 2 and shape == (_cdiv(rows, br), _cdiv(k, bc)):
            return (br, bc)
    forms = [
        "() or (1,) per tensor",
        f"({rows},) or ({rows}, 1) per row",
        *(f"{(_cdiv(rows, br), _cdiv(k, bc))} per {br}x{bc} block" for br, bc in blocks),
    ]
    raise ValueError(
        f"{op}: {name} has shape {shape}; for {what} of shape ({rows}, {k}) it must be "
        + ", ".join(forms)
    )


def _is_block(group: Group, rows: int, k: int) -> bool:
    """Whether a scale group is finer than per row (per tensor and per row are not blocks)."""
    br, bc = group
    return not (bc >= k and (br == 1 or br >= rows))


def matmul_fp8(
    a: GPUArray,
    b: GPUArray,
    *,
    scale_a: GPUArray,
    scale_b: GPUArray,
    out_dtype: Any = "bfloat16",
    bias: GPUArray | None = None,
    fast_accum: bool = False,
    out: GPUArray | None = None,
) -> GPUArray:
    """(scale_a . a) @ (scale_b . b)^T (+ bias): a [M, K], b [N, K] fp8 (module docstring)."""
    op = "matmul_fp8"
    for name, x in (("a", a), ("b", b)):
        chk.array(op, name, x)
        if not x.dtype.is_fp8:
            raise TypeError(f"{op}: {name} must be float8_e4m3fn or float8_e5m2, got {chk.desc(x)}")
        if x.ndim != 2:
            raise ValueError(f"{op}: {name} must be 2-D, got {chk.desc(x)}")
    if a.dtype.name == "float8_e5m2" and b.dtype.name == "float8_e5m2":
        raise TypeError(
            f"{op}: float8_e5m2 x float8_e5m2 has no FP8 tensor-core product; make a or b "
            "float8_e4m3fn"
        )
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(
            f"{op}: a has {chk.desc(a)} and b has {chk.desc(b)}: b is [N, K] (weights stored "
            f"[out_features, in_features]) and its K {b.shape[1]} must equal a's {k}"
        )
    if k == 0 or k % 16:
        raise ValueError(
            f"{op}: K = {k} must be a positive multiple of 16 (FP8 tensor-core products read "
            "16-byte aligned K-major rows)"
        )
    rd = _result_dtype(op, out_dtype)
    sa = _scale_array(op, "scale_a", scale_a)
    sb = _scale_array(op, "scale_b", scale_b)
    ga = _operand_group(op, "scale_a", sa, m, k, ((1, 128),), "a")
    gb = _operand_group(op, "scale_b", sb, n, k, ((128, 128), (1, 128)), "b")
    if not isinstance(fast_accum, bool):
        raise TypeError(f"{op}: fast_accum must be a bool, got {type(fast_accum).__name__}")
    if fast_accum and (_is_block(ga, m, k) or _is_block(gb, n, k)):
        raise ValueError(f"{op}: fast_accum is not available with block scales")
    if bias is not None:
        chk.array(op, "bias", bias)
        if bias.shape != (n,) or bias.dtype is not rd:
            raise ValueError(
                f"{op}: bias has {chk.desc(bias)} but must have shape ({n},) and the result "
                f"dtype {rd.name}"
            )
    chk.out_arg(op, out, (m, n), rd)
    params = {"out_dtype": rd.np_dtype, "groups": (ga, gb), "fast_accum": fast_accum}
    return finish(run(op, (a, b, sa, sb, bias), params, out=out), out)


def _block_arg(op: str, block: Any) -> Group:
    """block=b -> (1, b); block=(br, bc) -> (br, bc); positive ints."""
    vals = block if isinstance(block, (tuple, list)) else (1, block)
    try:
        br, bc = (operator.index(v) for v in vals)
    except (TypeError, ValueError):
        raise ValueError(f"{op}: block must be an int or a pair of ints, got {block!r}") from None
    if br < 1 or bc < 1:
        raise ValueError(f"{op}: block sizes must be >= 1, got {block!r}")
    return br, bc


def _grouping(op: str, x: GPUArray, granularity: str, block: Any) -> tuple[Group, tuple[int, ...]]:
    """(group, scale shape) of quantize_fp8 for x's [R, C] view."""
    lead, cols = x.shape[:-1], x.shape[-1]
    rows = 1
    for v in lead:
        rows *= v
    if granularity == "tensor":
        return (rows, cols), (1,)
    if granularity == "row":
        return (1, cols), (*lead, 1)
    br, bc = _block_arg(op, block)
    if br == 1:
        return (1, bc), (*lead, _cdiv(cols, bc))
    if x.ndim != 2:
        raise ValueError(f"{op}: 2-D blocks {(br, bc)} need a 2-D array, got {chk.desc(x)}")
    return (br, bc), (_cdiv(rows, br), _cdiv(cols, bc))


def _nonempty(op: str, name: str, x: GPUArray) -> None:
    if x.ndim == 0 or x.size == 0:
        raise ValueError(
            f"{op}: {name} must have at least one dim and one element, got {chk.desc(x)}"
        )


def quantize_fp8(
    x: GPUArray,
    dtype: Any = "float8_e4m3fn",
    *,
    granularity: str = "tensor",
    block: Any = 128,
) -> tuple[GPUArray, GPUArray]:
    """(q, scale): x quantized to fp8 with amax-based scales (module docstring)."""
    op = "quantize_fp8"
    chk.array(op, "x", x)
    if x.dtype.name not in _SOURCES:
        raise TypeError(f"{op}: x must be one of {_SOURCES}, got {chk.desc(x)}")
    _nonempty(op, "x", x)
    dt = _fp8_dtype(op, "dtype", dtype)
    chk.choice(op, "granularity", granularity, ("tensor", "row", "block"))
    group, scale_shape = _grouping(op, x, granularity, block)
    params = {"dtype": dt.name, "group": group, "scale_shape": scale_shape}
    return run(op, (x,), params)  # type: ignore[no-any-return]


def dequantize_fp8(
    q: GPUArray,
    scale: GPUArray,
    *,
    out_dtype: Any = "bfloat16",
    block: Any = 128,
    out: GPUArray | None = None,
) -> GPUArray:
    """q * scale rounded once to out_dtype; scale as quantize_fp8 returns it."""
    op = "dequantize_fp8"
    chk.array(op, "q", q)
    if not q.dtype.is_fp8:
        raise TypeError(f"{op}: q must be float8_e4m3fn or float8_e5m2, got {chk.desc(q)}")
    _nonempty(op, "q", q)
    s = _scale_array(op, "scale", scale)
    rd = _result_dtype(op, out_dtype)
    lead, cols = q.shape[:-1], q.shape[-1]
    rows = 1
    for v in lead:
        rows *= v
    if s.size == 1 and s.ndim <= 2:
        group: Group = (rows, cols)
    elif s.shape == (*lead, 1):
        group = (1, cols)
    else:
        group, want = _grouping(op, q, "block", block)
        if s.shape != want:
            raise ValueError(
                f"{op}: scale has {chk.desc(s)}; for q of shape {q.shape} it must be (1,) per "
                f"tensor, {(*lead, 1)} per row, or {want} for blocks of {group} (block="
                f"{block!r}; pass the block quantize_fp8 used)"
            )
    chk.out_arg(op, out, q.shape, rd)
    params = {"out_dtype": rd.np_dtype, "group": group}
    return run(op, (q, s), params, out=out)  # type: ignore[no-any-return]
