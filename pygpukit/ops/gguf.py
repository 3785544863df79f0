"""GGUF block formats on the device: dequantize_gguf and the product behind linear_quantized.

A ``QuantizedWeight`` of a GGUF format (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k; see
pygpukit/qweight.py) holds llama.cpp's blocks as the file stores them. Two routed ops read them
in place (Triton kernels, backends/triton_kernels/gguf.py; NumPy twin, backends/cpu/gguf.py):

- ``dequantize_gguf(qw, ids=None, dtype="float32")``: W's rows (all, or the rows named by an
  integer array ``ids`` of any shape, so a quantized embedding table is looked up without
  expanding it) as [..., K] values. In float32 they are the ``gguf`` package's
  (gguf.quants.dequantize) bit for bit; other dtypes round those values once. On the GPU an id
  outside [0, N) gives a row of NaN (as gp.embedding); the NumPy backend raises IndexError.
- ``linear_quantized(x, qw, bias)`` (pygpukit/ops/gemv.py) with a GGUF weight: x [..., K] of
  float16, bfloat16 or float32 times the dequantized W^T plus bias, one rounding to x's dtype.
  Up to STREAM_MAX_ROWS rows stream the blocks once and multiply the float32 values on the CUDA
  cores. Up to TENSOR_CORE_MAX_ROWS rows of float16 / bfloat16 x, when W has enough rows to
  fill the device (TENSOR_CORE_MIN_COLUMNS_PER_SM), one kernel dequantizes each K tile of W,
  rounds it to x's dtype and multiplies on the tensor cores (float32 accumulation). Other rows
  dequantize W into x's dtype (a transient N x K array for the call: 2 bytes a value, e.g.
  1 GiB for a 128256 x 4096 head; in a captured step it stays in the graph's pool) and run
  gp.linear, as a dequantized bf16/fp16 model would. Both round W to x's dtype. Under the
  deterministic mode every row count takes one kernel instead (the tensor-core kernel's fixed
  tile for half x, float32 x on the CUDA cores), so a row's bits do not depend on the batch.
"""

from __future__ import annotations

from typing import Any

from pygpukit import determinism, runtime
from pygpukit.array import GPUArray
from pygpukit.dtypes import as_dtype
from pygpukit.ops import _checks as chk
from pygpukit.ops.matmul import linear
from pygpukit.qweight import QuantizedWeight
from pygpukit.routing.dispatch import run

__all__ = [
    "dequantize_gguf", "linear_gguf", "STREAM_MAX_ROWS", "TENSOR_CORE_MAX_ROWS",
    "TENSOR_CORE_MIN_COLUMNS_PER_SM",
]  # fmt: skip

# Rows of x up to which linear_quantized streams the blocks (one pass over W, CUDA cores).
# Measured on an H100 (benchmarks/quantized.py, BENCHMARKS.md, 2026-11-27): at 14336x4096 q4_1,
# 1 row streams in 27.7 us and 2 rows in 38.5 us (the bf16 product alone: 44 us).
STREAM_MAX_ROWS = 2
# Rows of float16 / bfloat16 x up to which the tensor-core kernel multiplies W in place, when W
# has at least TENSOR_CORE_MIN_COLUMNS_PER_SM * (the stream's SMs) rows (output columns: its
# tiles of 32 columns then fill the SMs one and a half times, and each runs all of K); else W is
# dequantized into x's dtype and multiplied densely. On an H200 (132 SMs, 2026-11-27; one call
# of the sweep, the table in BENCHMARKS.md is another), us, the kernel against the earlier
# dequantize + gp.linear, 4 / 16 rows: 14336x4096 q4_0 47.0 / 51.1 against 82.4
# / 82.1, q4_k 63.3 / 68.9 against 104.0 / 103.4, q8_0 49.5 / 51.5 against 90.0 / 90.2, q6_k
# 61.9 / 64.8 against 99.5 / 98.9; 8192x2048 19.0-26.1 against 23.7-65.8; but 4096x14336 (128
# tiles) 100.4-156.6 against 81.0-104.2. At 64 rows the kernel's best tile lost (14336x4096:
# q4_k 108.5 against 85.8, q4_0 82.2 against 80.3).
TENSOR_CORE_MAX_ROWS = 16
TENSOR_CORE_MIN_COLUMNS_PER_SM = 48

_RESULTS = ("float32", "float16", "bfloat16")


def _gguf_weight(op: str, qw: Any) -> QuantizedWeight:
    if not isinstance(qw, QuantizedWeight) or not qw.is_gguf:
        got = qw.format if isinstance(qw, QuantizedWeight) else type(qw).__name__
        raise TypeError(f"{op}: qw must be a QuantizedWeight of a GGUF format, got {got}")
    return qw


def dequantize_gguf(
    qw: QuantizedWeight,
    ids: GPUArray | None = None,
    *,
    dtype: Any = "float32",
    out: GPUArray | None = None,
) -> GPUArray:
    """Rows of a GGUF-format weight as values: [N, K], or ids.shape + (K,) (module docstring)."""
    op = "dequantize_gguf"
    _gguf_weight(op, qw)
    try:
        dt = as_dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.name not in _RESULTS:
        raise ValueError(f"{op}: dtype must be one of {_RESULTS}, got {dtype!r}")
    n, k = qw.shape
    lead: tuple[int, ...] = (n,)
    if ids is not None:
        chk.array(op, "ids", ids)
        if ids.dtype.name not in ("int32", "int64"):
            raise TypeError(f"{op}: ids must be int32 or int64, got {chk.desc(ids)}")
        lead = ids.shape
    chk.out_arg(op, out, (*lead, k), dt)
    if out is not None and not out.is_contiguous():
        raise ValueError(f"{op}: out must be contiguous, got {chk.desc(out)}")
    params = {"fmt": qw.format, "out_dtype": dt.np_dtype}
    return run(op, (qw.data, ids), params, out=out)  # type: ignore[no-any-return]


def _tensor_cores_fit(x: GPUArray, n: int, rows: int) -> bool:
    """Whether rows of x take the tensor-core kernel in place of dequantize + gp.linear: half x
    on a GPU, at most TENSOR_CORE_MAX_ROWS rows, W wide enough to fill the stream's SMs. (On the
    CPU the NumPy twin multiplies exact values, so it keeps the dense path's rounding of W.)"""
    return (
        x.device.type == "cuda"
        and x.dtype.name in ("float16", "bfloat16")
        and rows <= TENSOR_CORE_MAX_ROWS
        and n >= TENSOR_CORE_MIN_COLUMNS_PER_SM * runtime.sm_count(x.device)
    )


def linear_gguf(
    x: GPUArray, qw: QuantizedWeight, bias: GPUArray | None, out: GPUArray | None
) -> GPUArray:
    """The GGUF branch of linear_quantized (x, bias and out checked there)."""
    op = "linear_quantized"
    for name, a in (("bias", bias), ("out", out)):
        if a is not None and a.device != x.device:
            raise ValueError(f"{op}: {name} is on {a.device} but x is on {x.device}")
    if out is not None:
        rows = 1
        for v in out.shape[:-1]:
            rows *= v
        try:
            out.view(rows, out.shape[-1])
        except ValueError:
            raise ValueError(
                f"{op}: out has {chk.desc(out)} with strides {out.strides}; its leading dims "
                "must collapse into one (a column slice of a contiguous array is fine)"
            ) from None
    rows = 1
    for v in x.shape[:-1]:
        rows *= v
    if (
        rows > STREAM_MAX_ROWS
        and not determinism.is_deterministic()
        and not _tensor_cores_fit(x, qw.shape[0], rows)
    ):
        # More rows than the in-place kernels serve well: expand W once into x's dtype (the
        # value the tensor cores would see) and run the dense product (cuBLASLt on a GPU).
        w = dequantize_gguf(qw, dtype=x.dtype)
        return linear(x, w, bias, out=out)
    return run("linear_gguf", (x, qw.data, bias), {"fmt": qw.format}, out=out)  # type: ignore[no-any-return]
