"""The native backend: cuBLASLt matrix products (in the Rust core, pygpukit._core), plus the ops
of the optional C++ extension ``_pygpukit_native`` when it is built.

matmul / linear / linear_bias_gelu here take validated GPUArrays (pygpukit/ops/matmul.py checks
shapes, dtypes and devices first) and follow the NumPy backend's semantics
(pygpukit/backends/cpu/matmul.py): np.matmul broadcasting, fp32 accumulation for half types,
exact fp32 unless TF32 is opted into (pygpukit/precision.py), fp64 in fp64.

How a call reaches cuBLASLt:
- Inputs of another dtype are cast to the result dtype first (the ``cast`` op).
- The two innermost dims of each operand are read in place when either of them is contiguous
  (a transposed view becomes a cuBLASLt transpose, e.g. ``w.T`` in linear); any other layout is
  copied with ``contiguous()`` before broadcasting, never after.
- Batch dims broadcast with stride 0 (strided-batched GEMM). A batch whose dims cannot be read
  with one stride loops over its outer dims. A 2-D right operand under a batched left operand
  with rows evenly spaced folds the batch into M (one large GEMM, as torch does for linear).
- The output is written in place when ``out=`` is contiguous, else into a temporary then copied.
- Epilogues: cuBLASLt's BIAS, RELU(_BIAS) and GELU(_BIAS) match the NumPy backend exactly in
  what they compute (bias and activation on the fp32 accumulator, one rounding), and cuBLASLt's
  GELU is the tanh approximation, so it serves "gelu_tanh" only, and not for float64 (its GELU
  is not computed to fp64 accuracy). For erf-GELU ("gelu") and SiLU the product (with the bias
  epilogue) comes back as ``Unfinished`` and the ops layer applies the routed activation, which
  rounds the product once more before the activation: within docs/design.md's half-precision
  bounds. A bias of another dtype than the result is left to the routed ``add`` the same way.
- A workspace of 32 MiB per (device, stream) (pygpukit/backends/_support/scratch.py) is reused
  by every product on that stream (stream order makes the reuse safe); the handle, descriptors,
  layouts and the heuristic's algorithm are cached in Rust.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pygpukit import _core, _layout, precision, runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.matmul_shape import product
from pygpukit.backends._support.output import Unfinished, deliver, target
from pygpukit.backends._support.scratch import stream_buffer
from pygpukit.dtypes import DataType, as_dtype, result_type

__all__ = [
    "matmul",
    "linear",
    "linear_bias_gelu",
    "set_gemv_max_m",
    "GEMV_MAX_M",
    "WORKSPACE_BYTES",
]

WORKSPACE_BYTES = 32 << 20
_GEMM_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
_I32_MAX = 2**31 - 1

# ----- layout helpers ----------------------------------------------------------------------------


def _inner(rows: int, cols: int, sr: int, sc: int) -> tuple[bool, int] | None:
    """How cuBLASLt can read a [rows, cols] matrix with element strides (sr, sc) in place:
    (False, ld) rows contiguous with row stride ld; (True, ld) columns contiguous (a transposed
    view) with column stride ld; None when neither (copy it first)."""
    if cols == 1 or sc == 1:
        ld = sr if rows > 1 else cols
        if ld >= max(cols, 1):
            return False, ld
    if rows == 1 or sr == 1:
        ld = sc if cols > 1 else rows
        if ld >= max(rows, 1):
            return True, ld
    return None


def _ready(x: GPUArray) -> GPUArray:
    """x itself when cuBLASLt can read its two inner dims in place, else a contiguous copy."""
    r, c = x._shape[-2], x._shape[-1]
    sr, sc = x._estrides[-2], x._estrides[-1]
    if _inner(r, c, sr, sc) is None or any(s < 0 for s in x._estrides):
        return x.contiguous()
    return x


def _cast(x: GPUArray, dt: DataType) -> GPUArray:
    return x if x._dtype is dt else x.astype(dt)


# ----- the GEMM driver ---------------------------------------------------------------------------


def _gemm(
    a: GPUArray,
    b: GPUArray,
    d: GPUArray,
    *,
    epilogue: str = "none",
    bias: GPUArray | None = None,
) -> None:
    """d[..., M, N] = epilogue(a[..., M, K] @ b[..., K, N]); d contiguous, all of d's dtype,
    M, N, K >= 1. a and b broadcast to d's batch dims."""
    dev = d._device
    dt = d._dtype
    lead = d._shape[:-2]
    m, n = d._shape[-2], d._shape[-1]
    k = a._shape[-1]
    a = _ready(a).broadcast_to((*lead, m, k))
    b = _ready(b).broadcast_to((*lead, k, n))
    a_trans, lda = _inner(m, k, a._estrides[-2], a._estrides[-1]) or (False, k)
    b_trans, ldb = _inner(k, n, b._estrides[-2], b._estrides[-1]) or (False, n)
    sa, sb, sd = a._estrides[:-2], b._estrides[:-2], d._estrides[:-2]
    # Loop over the fewest outer batch dims that leave both operands one batch stride each.
    plan = _layout.plan_batches(lead, sa, sb)
    batch = plan.batch
    stride_a, stride_b = plan.strides
    stride_d = m * n
    mm = m
    if batch > 1 and stride_b == 0 and not a_trans and stride_a > 0:
        # Rows of all batches evenly spaced: one [batch*M, K] product (d is contiguous).
        if m == 1 and stride_a >= k:
            mm, lda, batch = batch, stride_a, 1
        elif m > 1 and stride_a == m * lda:
            mm, batch = batch * m, 1
    if batch > _I32_MAX:
        raise ValueError(f"matmul: batch of {batch} matrices exceeds cuBLASLt's int32 count")
    stream = runtime.current_stream(dev)
    ws = stream_buffer(dev, "cublaslt", WORKSPACE_BYTES)
    tf32 = dt.name == "float32" and precision.allow_tf32()
    item = dt.itemsize
    a0, b0, d0 = a.data_ptr(), b.data_ptr(), d.data_ptr()
    bias_ptr = 0 if bias is None else bias.data_ptr()
    handle = stream.handle
    for oa, ob, od in _layout.loop_offsets(plan.loop, sa, sb, sd):
        _core.cublaslt_matmul(
            dev.index,
            handle,
            dt.name,
            mm,
            n,
            k,
            batch,
            a0 + oa * item,
            a_trans,
            lda,
            stride_a,
            b0 + ob * item,
            b_trans,
            ldb,
            stride_b,
            d0 + od * item,
            n,
            stride_d,
            epilogue,
            bias_ptr,
            tf32,
            ws.ptr,
            WORKSPACE_BYTES,
        )


# Decode GEMV crossover: _gemm_rows hands products of at most GEMV_MAX_M[class] rows
# to the native GEMV kernel (native/src/gemv, the op gp.gemv; same numerics: fp32 accumulation,
# bias in fp32, one rounding) instead of cuBLASLt, for float16/bfloat16 without an activation,
# K % 8 == 0 and 16-byte aligned operands, when the extension has the gemv family. Class by
# weight size: "small" below 2^24 elements (32 MiB of bf16), else "large". 0 = always cuBLASLt.
# Measured with benchmarks/test_gemv.py on an H200 (2026-11-21, device time, L2 flushed):
# cuBLASLt is as fast or faster at every M = 1..16 (K8192 N29568 M1: GEMV 141 us, cuBLASLt
# 131 us; K4096 N14336: 43.9 vs 40.6; K2048 N2048: 9.8 vs 9.5), so both classes stay 0 and
# the dense GEMV serves gp.gemv only. (gp.linear's one-row decode path, the Triton decode GEMV,
# is chosen in the ops layer: pygpukit/ops/gemv.py decode_gemv.) PYGPUKIT_GEMV_MAX_M=<rows>
# overrides both classes (read once, at import).
GEMV_MAX_M: dict[str, int] = {"small": 0, "large": 0}
_GEMV_ENV = os.environ.get("PYGPUKIT_GEMV_MAX_M")
_GEMV_ENV_M = int(_GEMV_ENV) if _GEMV_ENV else None
_gemv_top = [0]  # the largest limit in force: the hot path's one comparison
_gemv_rows_fn: list[Callable[..., None] | None] = []


def set_gemv_max_m(small: int | None = None, large: int | None = None) -> None:
    """Change GEMV_MAX_M at run time (benchmarks, experiments); PYGPUKIT_GEMV_MAX_M still wins."""
    if small is not None:
        GEMV_MAX_M["small"] = int(small)
    if large is not None:
        GEMV_MAX_M["large"] = int(large)
    _gemv_top[0] = _GEMV_ENV_M if _GEMV_ENV_M is not None else max(GEMV_MAX_M.values())


set_gemv_max_m()


def _gemv_rows(
    x: GPUArray, w: GPUArray, d: GPUArray, m: int, n: int, k: int, epi: str, bias: GPUArray | None
) -> bool:
    """Run the product on the GEMV kernel when the crossover table says so (True if it ran)."""
    cls = "small" if n * k < (1 << 24) else "large"
    limit = _GEMV_ENV_M if _GEMV_ENV_M is not None else GEMV_MAX_M[cls]
    if m > limit or epi not in ("none", "bias") or k % 8:
        return False
    if d._dtype.name not in ("float16", "bfloat16") or (x.data_ptr() | w.data_ptr()) % 16:
        return False
    if not _gemv_rows_fn:  # once: the extension and its gemv family, or None
        from pygpukit.backends.native._libs import extension, status
        from pygpukit.backends.native.gemv import linear_rows

        ok = status()[0] and hasattr(extension(), "gemv")

        _gemv_rows_fn.append(linear_rows if ok else None)
    fn = _gemv_rows_fn[0]
    if fn is None:
        return False
    fn(x, w, d, m, n, k, bias)
    return True


def _gemm_rows(
    x: GPUArray, w: GPUArray, d: GPUArray, m: int, n: int, k: int, epi: str, bias: GPUArray | None
) -> None:
    """d[m, n] = epi(x[m, k] @ w[n, k]^T): the decode hot path (contiguous rows, one product).

    The same cuBLASLt call _gemm makes for this layout (w read transposed in place, ld = k),
    without its batch planning: every linear of a transformer step comes through here.
    """
    if m <= _gemv_top[0] and _gemv_rows(x, w, d, m, n, k, epi, bias):
        return
    dev = d._device
    dt = d._dtype
    stream = runtime.current_stream(dev)
    ws = stream_buffer(dev, "cublaslt", WORKSPACE_BYTES)
    # fmt: off
    _core.cublaslt_matmul(
        dev.index, stream.handle, dt.name, m, n, k, 1,
        x.data_ptr(), False, k, 0,
        w.data_ptr(), True, k, 0,
        d.data_ptr(), n, m * n,
        epi, 0 if bias is None else bias.data_ptr(),
        dt.name == "float32" and precision.allow_tf32(), ws.ptr, WORKSPACE_BYTES,
    )
    # fmt: on


def _result_dtype(out_dtype: Any, *arrays: GPUArray) -> DataType:
    if out_dtype is not None:
        return as_dtype(out_dtype)
    return result_type(*arrays) if len(arrays) > 1 else arrays[0]._dtype


def _check_dtype(op: str, dt: DataType) -> None:
    if dt.name not in _GEMM_DTYPES:
        raise TypeError(
            f"{op}: the native backend multiplies float16/bfloat16/float32/float64, got {dt.name}"
        )


def matmul(
    a: GPUArray, b: GPUArray, *, out: GPUArray | None = None, out_dtype: Any = None
) -> GPUArray:
    """a @ b with np.matmul's rules, on cuBLASLt (integer results: the matmul_int kernel)."""
    dt = _result_dtype(out_dtype, a, b)
    if dt.kind in ("i", "u"):
        # cuBLASLt has no wraparound integer GEMM: native/src/matmul_int (NumPy's semantics).
        from pygpukit.backends.native.matmul_int import matmul as matmul_int

        return matmul_int(a, b, out=out, out_dtype=dt)
    _check_dtype("matmul", dt)
    return product(_cast(a, dt), _cast(b, dt), dt, out, _gemm)


# linear's activations: which cuBLASLt epilogue computes them exactly as the NumPy backend does.
_FUSED = {None: "", "relu": "relu", "gelu_tanh": "gelu_tanh"}
_unsupported: set[tuple[str, str]] = set()


def _epilogue_name(act: str, with_bias: bool) -> str:
    if not act:
        return "bias" if with_bias else "none"
    return f"{act}_bias" if with_bias else act


def linear(
    x: GPUArray,
    w: GPUArray,
    bias: GPUArray | None = None,
    *,
    out: GPUArray | None = None,
    activation: str | None = None,
    out_dtype: Any = None,
) -> GPUArray | Unfinished:
    """activation(x @ w^T + bias); x [..., in], w [out, in], bias [out]. What cuBLASLt cannot
    fuse (an erf-GELU or SiLU, a bias of another dtype) comes back as ``Unfinished``."""
    dt = _result_dtype(out_dtype, x, w)
    _check_dtype("linear", dt)
    x, w = _cast(x, dt), _cast(w, dt)
    n, k = w._shape
    lead = x._shape[:-1]
    shape = (*lead, n)
    bias_fused = bias is not None and bias._dtype is dt
    if bias_fused and bias is not None:
        if not bias.is_contiguous() or bias.data_ptr() % 16:
            bias = bias.copy()  # cuBLASLt reads the bias vector with 16-byte loads
    act = _FUSED.get(activation)
    if act == "gelu_tanh" and dt.name == "float64":
        # cuBLASLt's GELU epilogue is not fp64-accurate (errors ~1e-11 measured on an H200 with
        # cuBLAS 13.1): the routed gelu computes it in fp64 instead (Unfinished).
        act = None
    # Fully fused only when cuBLASLt computes the whole epilogue; otherwise at most the bias
    # (the activation must come after a bias added by the routed add).
    fully_fused = act is not None and (bias is None or bias_fused)
    epi = _epilogue_name((act or "") if fully_fused else "", bias_fused)
    if (dt.name, epi) in _unsupported:
        fully_fused, epi = False, "none"
        bias_fused = False
    if k == 0 or 0 in shape:
        res = target(out, shape, dt, x)
        res.fill_(0)
        return _rest(res, bias, activation, dt, out, bias_added=False)
    res = target(out if fully_fused else None, shape, dt, x)
    xm = x.reshape(-1, k) if x.ndim != 2 else x
    m = xm._shape[0]
    try:
        if n > 1 and k > 1 and xm._estrides == (k, 1) and w._estrides == (k, 1):
            _gemm_rows(xm, w, res, m, n, k, epi, bias if bias_fused else None)
        else:
            _gemm(xm, w.T, res.view((m, n)), epilogue=epi, bias=bias if bias_fused else None)
    except _core.CudaError as exc:
        if getattr(exc, "name", "") != "CUBLAS_STATUS_NOT_SUPPORTED" or epi == "none":
            raise
        # This cuBLASLt has no kernel for the epilogue at this dtype: remember, run unfused.
        _unsupported.add((dt.name, epi))
        return linear(x, w, bias, out=out, activation=activation, out_dtype=dt)
    if fully_fused:
        return deliver(res, out)
    return _rest(res, bias, activation, dt, out, bias_added=bias_fused)


def _rest(
    y: GPUArray,
    bias: GPUArray | None,
    activation: str | None,
    dt: DataType,
    out: GPUArray | None,
    *,
    bias_added: bool,
) -> GPUArray | Unfinished:
    """y delivered, or the part of the epilogue cuBLASLt did not do, for the ops layer."""
    pending = None if bias_added else bias
    if pending is None and activation is None:
        return deliver(y, out)
    return Unfinished(y, pending, activation, dt)


def linear_bias_gelu(
    x: GPUArray,
    w: GPUArray,
    bias: GPUArray,
    *,
    out: GPUArray | None = None,
    approximate: str = "none",
    out_dtype: Any = None,
) -> GPUArray | Unfinished:
    """gelu(x @ w^T + bias), w [out_features, in_features] (the 0.2.x call form)."""
    act = "gelu_tanh" if approximate == "tanh" else "gelu"
    return linear(x, w, bias, out=out, activation=act, out_dtype=out_dtype)
