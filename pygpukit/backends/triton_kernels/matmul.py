"""The fixed-tile GEMM: matmul, linear and linear_bias_gelu whose every output row has the same
bits whatever the number of rows (the deterministic mode's products, pygpukit/determinism.py).

Numerics of pygpukit/backends/cpu/matmul.py: inputs rounded to the result dtype, products
accumulated in float32 (tensor cores for float16/bfloat16; float32 is exact fp32, TF32 only when
gp.set_matmul_precision("tf32") asks for it), bias and activation on the float32 sum, one
rounding at the store.

Why each row is batch invariant:
- Every launch uses the same tile: 16 rows (tl.dot's smallest, one mma row block; a call with one
  row pads the other 15 with zeros, which no other row ever reads), BLOCK_N columns, BLOCK_K deep.
  A row's sum therefore runs through the same instructions in the same order in every launch.
- K is cut into fixed chunks of K_CHUNK (1024) elements. Each chunk is summed from zero, and the
  chunk sums are added in chunk order to a float32 total that starts at zero. The chunking is a
  function of K alone, so the order of every addition is too.
- How the chunks are scheduled is free, because it never changes that arithmetic: a launch with
  few output tiles (decode: one row tile) gives each chunk its own program, which stores its
  partial and lets the last program of the tile to finish add them in order (an atomic counter
  per tile, released after a CTA barrier, reset to 0 by that program: the split-key decode
  attention's pattern); a launch with enough tiles to fill the GPU loops over the chunks in one
  program. Both give identical bits.
What it costs against cuBLASLt is measured in BENCHMARKS.md ("deterministic mode").
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from pygpukit import precision
from pygpukit.backends._support.matmul_shape import product
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends._support.scratch import decode_workspace
from pygpukit.backends.triton_kernels._common import GPUArray, as_dt, cdiv, sm_count, tl_dtype
from pygpukit.backends.triton_kernels.activation import gelu_c, sigmoid_c
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.dtypes import DataType, result_type

__all__ = ["matmul", "linear", "linear_bias_gelu", "K_CHUNK", "BLOCK_M"]

# The numerics: changing any of these changes result bits (never their accuracy). H100 sweep
# (bf16, M = 1, the Llama-3.2-1B projections weighted by their count per token, 2026-11-26):
# BLOCK_N 32/64/128 x K_CHUNK 256/512/1024 x BLOCK_K 64/128 x 3/4 stages; 64/1024/128/3 took
# 1370 us a token against cuBLASLt's 1307 (1.05x); the first choice, 64/512/64/3, took 1421.
BLOCK_M = 16
BLOCK_N = 64
BLOCK_K = 128  # float16/bfloat16; float32 tiles are twice the bytes: 64
K_CHUNK = 1024  # a multiple of both BLOCK_K values
# The schedule only: chunks get programs of their own while the output tiles number fewer than
# this many per multiprocessor.
SPLIT_BELOW_TILES_PER_SM = 2
NUM_WARPS = 4
NUM_STAGES = 3

_ACTS = (None, "relu", "gelu", "gelu_tanh", "silu")
_DTYPES = frozenset({"float16", "bfloat16", "float32"})


@triton.jit
def _chunk_sum(
    A, B, rm, rn, M, N, k0, k1, sam, sak, sbk, sbn,
    DT: tl.constexpr, PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    """sum over k in [k0, k1) of A[rm, k] B[k, rn], from zero, in float32."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    am = rm.to(tl.int64)[:, None] * sam
    bn = rn.to(tl.int64)[None, :] * sbn
    for k in range(k0, k1, BLOCK_K):
        rk = (k + tl.arange(0, BLOCK_K)).to(tl.int64)  # K x stride may pass 2^31
        a = tl.load(
            A + am + rk[None, :] * sak, mask=(rm < M)[:, None] & (rk < k1)[None, :], other=0.0
        )
        b = tl.load(
            B + rk[:, None] * sbk + bn, mask=(rk < k1)[:, None] & (rn < N)[None, :], other=0.0
        )
        acc = tl.dot(a.to(DT), b.to(DT), acc, input_precision=PREC)
    return acc


@triton.jit
def _store(
    total, Bias, Y, rm, rn, M, N, sbias, sym, syn, HAS_BIAS: tl.constexpr, ACT: tl.constexpr
):  # fmt: skip
    """The epilogue on the float32 total (the NumPy backend's formulas), one rounding."""
    y = total
    if HAS_BIAS:
        y = y + tl.load(Bias + rn * sbias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACT == "relu":
        y = tl.maximum(y, tl.zeros_like(y), propagate_nan=tl.PropagateNan.ALL)
    elif ACT == "silu":
        y = y * sigmoid_c(y)
    elif ACT == "gelu":
        y = gelu_c(y, "none")
    elif ACT == "gelu_tanh":
        y = gelu_c(y, "tanh")
    yp = Y + rm.to(tl.int64)[:, None] * sym + rn.to(tl.int64)[None, :] * syn
    tl.store(yp, y.to(Y.dtype.element_ty), mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def _gemm_fixed(
    A, B, Bias, Y, P, CNT, M, N, K, chunks, n_tiles, sam, sak, sbk, sbn, sbias, sym, syn,
    SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, DT: tl.constexpr,
    PREC: tl.constexpr, K_CHUNK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # output tile
    pid_m = pid // n_tiles
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid - pid_m * n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    total = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if SPLIT:  # one program per chunk; the tile's last program adds the partials in order
        c = tl.program_id(1)
        k0 = c * K_CHUNK
        acc = _chunk_sum(
            A, B, rm, rn, M, N, k0, tl.minimum(k0 + K_CHUNK, K), sam, sak, sbk, sbn,
            DT=DT, PREC=PREC, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )  # fmt: skip
        tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        base = pid.to(tl.int64) * chunks
        tl.store(P + (base + c) * (BLOCK_M * BLOCK_N) + tile, acc)
        # Every thread's partial store precedes the release of the counter (bar.sync, then a
        # cumulative acq_rel atomic); the last arrival acquires them all.
        tl.debug_barrier()
        done = tl.atomic_add(CNT + pid, 1, sem="acq_rel", scope="gpu")
        if done == chunks - 1:
            for j in range(0, chunks):
                # .cg: from L2, where the other programs' partials are (never a stale L1 line).
                part = tl.load(P + (base + j) * (BLOCK_M * BLOCK_N) + tile, cache_modifier=".cg")
                total = total + part
            _store(total, Bias, Y, rm, rn, M, N, sbias, sym, syn, HAS_BIAS=HAS_BIAS, ACT=ACT)
            tl.store(CNT + pid, 0)  # ready for the next launch / graph replay
    else:  # the same sums, one chunk after the other
        for c in range(0, chunks):
            k0 = c * K_CHUNK
            total = total + _chunk_sum(
                A, B, rm, rn, M, N, k0, tl.minimum(k0 + K_CHUNK, K), sam, sak, sbk, sbn,
                DT=DT, PREC=PREC, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
            )  # fmt: skip
        _store(total, Bias, Y, rm, rn, M, N, sbias, sym, syn, HAS_BIAS=HAS_BIAS, ACT=ACT)


def _gemm2d(
    a: GPUArray,
    b: GPUArray,
    y: GPUArray,
    bias: GPUArray | None = None,
    activation: str | None = None,
) -> None:
    """y[M, N] = activation(a[M, K] @ b[K, N] + bias) for 2-D views of any strides."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return
    dt = y.dtype
    half = dt.name != "float32"
    bk = BLOCK_K if half else BLOCK_K // 2
    prec = "tf32" if half or precision.allow_tf32() else "ieee"
    chunks = max(1, cdiv(k, K_CHUNK))
    n_tiles = cdiv(n, BLOCK_N)
    tiles = cdiv(m, BLOCK_M) * n_tiles
    split = chunks > 1 and tiles < SPLIT_BELOW_TILES_PER_SM * sm_count(y)
    parts = cnt = y
    if split:
        ws = decode_workspace(y.device, tiles * chunks, BLOCK_M * BLOCK_N, tiles)
        assert ws.parts is not None and ws.cnt is not None
        parts, cnt = ws.parts, ws.cnt
    launch(
        _gemm_fixed, (tiles, chunks if split else 1),
        a, b, bias if bias is not None else y, y, parts, cnt, m, n, k, chunks, n_tiles,
        *a.element_strides, *b.element_strides, bias.element_strides[0] if bias is not None else 0,
        *y.element_strides,
        SPLIT=split, HAS_BIAS=bias is not None, ACT=activation or "", DT=tl_dtype(dt), PREC=prec,
        K_CHUNK=K_CHUNK, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=bk,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )  # fmt: skip


def _batched(a: GPUArray, b: GPUArray, d: GPUArray) -> None:
    """d[..., M, N] = a[..., M, K] @ b[..., K, N] with broadcast batch dims: one launch per
    matrix (the batch loop of the deterministic mode's products; every launch is the same
    fixed-tile kernel, so the batch layout never changes a matrix's bits)."""
    for idx in np.ndindex(*d.shape[:-2]):
        _gemm2d(_matrix(a, idx), _matrix(b, idx), d[idx] if idx else d)


def _matrix(x: GPUArray, idx: tuple[int, ...]) -> GPUArray:
    """The matrix of x at the broadcast batch index idx (x's batch dims are its last ones)."""
    own = idx[len(idx) - (x.ndim - 2) :] if x.ndim > 2 else ()
    at = tuple(i if s > 1 else 0 for i, s in zip(own, x.shape[:-2], strict=True))
    return x[at] if at else x


def _result(out_dtype: Any, *arrays: GPUArray) -> DataType:
    dt = as_dt(out_dtype) if out_dtype is not None else result_type(*arrays)
    if dt.name not in _DTYPES:
        raise TypeError(
            f"matmul (triton fixed-tile): dtype {dt.name} is not supported "
            "(float16, bfloat16, float32)"
        )
    return dt


def matmul(
    a: GPUArray, b: GPUArray, *, out: GPUArray | None = None, out_dtype: Any = None
) -> GPUArray:
    """a @ b with np.matmul's rules, each matrix on the fixed-tile kernel."""
    return product(a, b, _result(out_dtype, a, b), out, _batched)


def linear(
    x: GPUArray,
    w: GPUArray,
    bias: GPUArray | None = None,
    *,
    out: GPUArray | None = None,
    activation: str | None = None,
    out_dtype: Any = None,
) -> GPUArray:
    """activation(x @ w^T + bias); x [..., in], w [out, in], bias [out]: the whole epilogue in
    the kernel (every activation of gp.linear)."""
    if activation not in _ACTS:
        raise ValueError(f"linear: activation must be one of {_ACTS}, got {activation!r}")
    dt = _result(out_dtype, x, w)
    n, k = w.shape
    lead = x.shape[:-1]
    res = target(out, (*lead, n), dt, x)
    m = res.size // n if n else 0
    if m and n:
        _gemm2d(x.reshape(m, k), w.T, res.view((m, n)), bias, activation)
    return deliver(res, out)


def linear_bias_gelu(
    x: GPUArray,
    w: GPUArray,
    bias: GPUArray,
    *,
    out: GPUArray | None = None,
    approximate: str = "none",
    out_dtype: Any = None,
) -> GPUArray:
    """gelu(x @ w^T + bias), w [out_features, in_features] (the 0.2.x call form)."""
    act = "gelu_tanh" if approximate == "tanh" else "gelu"
    return linear(x, w, bias, out=out, activation=act, out_dtype=out_dtype)
