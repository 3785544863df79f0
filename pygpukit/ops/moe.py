"""Mixture-of-experts on the device: router, grouping by expert, grouped expert products.

A sparse MoE layer (Mixtral, Qwen3-MoE) runs as four routed ops, none of which reads a routing
result on the host, so a decode step with MoE layers replays from a CUDA graph:

1. ``moe_router(logits, top_k, normalize)`` -> (experts int32 [T, k], weights float32 [T, k]):
   softmax over the experts in float32, the k largest probabilities (largest first; equal ones
   in ascending expert order, as torch.topk), renormalised to sum 1 when ``normalize`` (Mixtral,
   Qwen3-MoE with norm_topk_prob). HF's TopKRouter modules compute exactly this.
2. ``moe_align(experts, num_experts, block_m)`` -> (rows int32 [P], block_expert int32 [NB]):
   the permutation. Routed row r = t*k + j (token t's j-th expert) goes into its expert's group;
   groups follow in expert order, rows ascending inside a group (a stable counting sort), and
   each group is padded to a multiple of ``block_m`` with the sentinel R = T*k. ``block_expert``
   names the expert of each block of ``block_m`` slots: -1 past the last used block, and
   ``num_experts`` for the group of rows whose expert id is outside [0, num_experts) (they
   produce zeros instead of reading out of bounds). P and NB are upper bounds that depend on
   T, k, num_experts and block_m only (static shapes: nothing waits for the counts).
3. ``moe_linear(x, w, rows, block_expert, top_k, w_up=None, row_scale=None)`` -> y [R, N]: the
   grouped GEMM. Slot r of a block of expert e computes ``x[r // top_k] @ w[e]^T`` (top_k > 1:
   x holds one row per token and the gather is fused into the product's loads; top_k == 1: x
   holds one row per routed row) and writes y[r], so un-permutation is fused into the stores.
   With ``w_up`` it computes ``silu(x w[e]^T) * (x w_up[e]^T)`` in one pass (the gated MLP's
   first half); with ``row_scale`` [R] each row is multiplied by its routing weight. Products
   accumulate in float32 and round once.
4. The per-token sum over its k rows is ``gp.sum(y.reshape(T, k, H), axis=1)``.

The backends: Triton (pygpukit/backends/triton_kernels/moe.py) on CUDA, NumPy on the CPU
(pygpukit/backends/cpu/moe.py, the reference); moe_linear also has a native twin on CUTLASS's
Hopper grouped GEMM (pygpukit/backends/native/moe.py; sm_90, float16/bfloat16 with K and N
multiples of 8), chosen by a route (Triton is first in the table: faster in most cases
measured). Every op checks shapes and dtypes here, before any kernel runs; the index arrays'
*values* cannot be checked without a host read, so the kernels are written to stay in bounds for
any values (documented per op). Values moe_align would not produce (an expert's blocks split
into several runs) stay in bounds everywhere but give unspecified results on the CUTLASS twin,
which builds one GEMM group per expert from the first and last block of its run.
"""

from __future__ import annotations

import operator
from typing import Any

from pygpukit import determinism
from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.ops.gguf import dequantize_gguf
from pygpukit.qweight import QuantizedWeight
from pygpukit.routing.dispatch import run

__all__ = [
    "moe_router", "moe_align", "moe_linear", "moe_align_sizes", "MAX_EXPERTS",
    "EXPERTS_DENSE_MIN_ROWS", "EXPERTS_DENSE_MAX_BYTES",
]  # fmt: skip

# GGUF experts with half x on a GPU: from this many routed rows an expert on average (48: where
# the engine's block_rows picks block_m 64), moe_linear dequantizes the experts into x's dtype
# and runs the dense grouped product; below, the tensor-core kernel (or, up to 16 routed rows
# and fewer than two an expert, the row-streaming kernel) reads the blocks in place. On an
# H200 (a Mixtral-8x7B layer's experts, 2026-11-27), us, the kernel against dequantize + dense:
# 4 rows an expert (16 tokens) q4_k 1170 / 1632, q4_0 750 / 1578; 16 rows (64 tokens) q4_k
# 1649 / 1698, q4_0 1072 / 1681; 64 rows (256 tokens) q4_k 2540 / 1746, q4_0 1677 / 1716; 256
# rows (1024 tokens) q4_k 7149 / 2670, q4_0 4511 / 2573.
EXPERTS_DENSE_MIN_ROWS = 48
# ... unless the transient dense copy (w, and w_up alongside it) would pass this many bytes: a
# Mixtral-8x7B layer's gated projection takes 1.75 GiB in bfloat16 (2 x 8 x 14336 x 4096 x 2
# bytes); larger layers stay on the kernel and keep the memory quantize="stored" saves.
EXPERTS_DENSE_MAX_BYTES = 2 << 30

# The router and the grouping hold one row of expert scores in a program (Qwen3-MoE: 128,
# DeepSeek-V3: 256); 1024 leaves room without spilling.
MAX_EXPERTS = 1024


def _int_param(op: str, name: str, v: Any, low: int, high: int | None = None) -> int:
    """v as an int in [low, high]: Python and NumPy integers (operator.index), not bool."""
    span = f"in [{low}, {high}]" if high is not None else f">= {low}"
    try:
        i = operator.index(v) if not isinstance(v, bool) else None
    except TypeError:
        i = None
    if i is None:
        raise TypeError(f"{op}: {name} must be an int {span}, got {v!r}")
    if i < low or (high is not None and i > high):
        raise ValueError(f"{op}: {name} must be an int {span}, got {v!r}")
    return int(i)


def moe_align_sizes(rows: int, num_experts: int, block_m: int) -> tuple[int, int]:
    """(P, NB): the slots and blocks ``moe_align`` returns for ``rows`` routed rows. At most
    min(E + 1, rows) groups are non-empty (the +1: out-of-range ids), each wasting under one
    block to padding."""
    groups = min(num_experts + 1, rows)
    nb = -(-rows // block_m) + groups
    return nb * block_m, nb


def moe_router(
    logits: GPUArray, top_k: int, *, normalize: bool = True
) -> tuple[GPUArray, GPUArray]:
    """(experts int32 [T, k], weights [T, k]) from router logits [T, E]: softmax in float32
    (float64 for float64 logits on the CPU, which also give float64 weights; the GPU kernel
    serves float16/bfloat16/float32), the top_k experts, their
    probabilities renormalised over the k when ``normalize``. NaN probabilities rank below every
    number, so every id is in [0, E)."""
    op = "moe_router"
    chk.array(op, "logits", logits)
    chk.floating(op, "logits", logits)
    if logits.ndim != 2 or logits.shape[1] < 1:
        raise ValueError(f"{op}: logits must be [tokens, experts], got {chk.desc(logits)}")
    e = logits.shape[1]
    if e > MAX_EXPERTS:
        raise ValueError(f"{op}: at most {MAX_EXPERTS} experts are supported, got {e}")
    k = _int_param(op, "top_k", top_k, 1, e)
    if not isinstance(normalize, bool):
        raise TypeError(f"{op}: normalize must be True or False, got {normalize!r}")
    res = run(op, (logits,), {"top_k": k, "normalize": normalize})
    return res[0], res[1]


def moe_align(experts: GPUArray, num_experts: int, block_m: int = 16) -> tuple[GPUArray, GPUArray]:
    """(rows int32 [P], block_expert int32 [NB]): the routed rows grouped by expert, each group
    padded to a multiple of block_m (a power of two >= 16: the grouped GEMM's row tile).
    See the module docstring for the layout and moe_align_sizes for P and NB."""
    op = "moe_align"
    chk.int32_array(op, "experts", experts)
    if experts.ndim != 2 or experts.size == 0:
        raise ValueError(f"{op}: experts must be a non-empty [tokens, k] array, got "
                         f"{chk.desc(experts)}")  # fmt: skip
    e = _int_param(op, "num_experts", num_experts, 1, MAX_EXPERTS)
    bm = _int_param(op, "block_m", block_m, 16, 256)
    if bm & (bm - 1):
        raise ValueError(f"{op}: block_m must be a power of two, got {bm}")
    res = run(op, (experts,), {"num_experts": e, "block_m": bm})
    return res[0], res[1]


def moe_linear(
    x: GPUArray,
    w: GPUArray | QuantizedWeight,
    rows: GPUArray,
    block_expert: GPUArray,
    top_k: int,
    *,
    w_up: GPUArray | QuantizedWeight | None = None,
    row_scale: GPUArray | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """y [R, N], R = x.shape[0] * top_k: for each routed row r in expert e's group,
    ``y[r] = x[r // top_k] @ w[e]^T`` (w [E, N, K]); ``silu(x w^T) * (x w_up^T)`` with w_up;
    times ``row_scale[r]`` (float32 [R]; float64 is served on the CPU only) when given. rows and
    block_expert come from moe_align. Slots holding a value outside [0, R) are skipped and
    blocks naming no expert in [0, E] touch nothing; the blocks of group E (out-of-range expert
    ids) write zeros. So no value of the index arrays reads or writes out of bounds. moe_align
    lists every row once; a row that no block lists has unspecified contents.

    w (and w_up) may also be GGUF-quantized experts, a QuantizedWeight of E stacked [N, K]
    matrices (``QuantizedWeight.from_blocks(fmt, rows, experts=E)``), x float16, bfloat16 or
    float32. Up to 16 routed rows, fewer than two an expert (decode; not under the deterministic
    mode), stream each row's expert and multiply the exact float32 values on the CUDA cores, as
    linear_quantized's one-row path; more rows dequantize each tile, round it to x's dtype and
    use the tensor cores, as dense weights of that dtype would be (the NumPy twin does the
    latter). With EXPERTS_DENSE_MIN_ROWS routed rows an expert or more (half x on a GPU, not
    under the deterministic mode, a copy within EXPERTS_DENSE_MAX_BYTES), the experts are
    dequantized into x's dtype for the call and the dense grouped product runs."""
    op = "moe_linear"
    chk.array(op, "x", x)
    chk.floating(op, "x", x)
    if isinstance(w, QuantizedWeight):
        e, n, k_dim = _expert_shape(op, x, w, w_up)
        bm, k = _moe_common(op, x, e, n, top_k, rows, block_expert, row_scale, out)
        if _experts_dense(x, w, w_up, k):
            wd = dequantize_gguf(w, dtype=x.dtype).reshape(e, n, k_dim)
            ud = None
            if isinstance(w_up, QuantizedWeight):
                ud = dequantize_gguf(w_up, dtype=x.dtype).reshape(e, n, k_dim)
            inputs: tuple[Any, ...] = (x, wd, rows, block_expert, ud, row_scale)
            return run(op, inputs, {"top_k": k, "block_m": bm}, out=out)  # type: ignore[no-any-return]
        up = w_up.data if isinstance(w_up, QuantizedWeight) else None
        inputs = (x, w.data, rows, block_expert, up, row_scale)
        params = {"top_k": k, "block_m": bm, "fmt": w.format, "experts": e}
        return run("moe_linear_gguf", inputs, params, out=out)  # type: ignore[no-any-return]
    if isinstance(w_up, QuantizedWeight):
        raise TypeError(f"{op}: w_up is quantized but w is not")
    chk.array(op, "w", w)
    if x.ndim != 2 or w.ndim != 3:
        raise ValueError(f"{op}: x must be [rows, K] and w [experts, N, K], got x "
                         f"{chk.desc(x)}, w {chk.desc(w)}")  # fmt: skip
    if w.dtype is not x.dtype:
        raise TypeError(f"{op}: w must have x's dtype {x.dtype.name}, got {chk.desc(w)}")
    e, n, k_dim = w.shape
    if x.shape[1] != k_dim:
        raise ValueError(f"{op}: x has K={x.shape[1]} but w is [E, N, K={k_dim}]")
    if w_up is not None:
        chk.array(op, "w_up", w_up)
        if w_up.shape != w.shape or w_up.dtype is not w.dtype:
            raise ValueError(f"{op}: w_up must match w ({chk.desc(w)}), got {chk.desc(w_up)}")
    bm, k = _moe_common(op, x, e, n, top_k, rows, block_expert, row_scale, out)
    inputs = (x, w, rows, block_expert, w_up, row_scale)
    return run(op, inputs, {"top_k": k, "block_m": bm}, out=out)  # type: ignore[no-any-return]


def _experts_dense(x: GPUArray, w: QuantizedWeight, w_up: Any, top_k: int) -> bool:
    """Whether GGUF experts are dequantized for the call (EXPERTS_DENSE_MIN_ROWS): half x on a
    GPU, not under the deterministic mode, enough routed rows an expert, a transient copy
    within EXPERTS_DENSE_MAX_BYTES."""
    if x.device.type != "cuda" or x.dtype.name not in ("float16", "bfloat16"):
        return False
    if determinism.is_deterministic():
        return False
    if x.shape[0] * top_k < EXPERTS_DENSE_MIN_ROWS * w.experts:
        return False
    n, k = w.shape
    copies = 2 if isinstance(w_up, QuantizedWeight) else 1
    return copies * n * k * x.dtype.itemsize <= EXPERTS_DENSE_MAX_BYTES


def _moe_common(
    op: str,
    x: GPUArray,
    e: int,
    n: int,
    top_k: Any,
    rows: Any,
    block_expert: Any,
    row_scale: Any,
    out: Any,
) -> tuple[int, int]:
    """(block_m, top_k) after the checks moe_linear's dense and quantized forms share."""
    k = _int_param(op, "top_k", top_k, 1, e)
    chk.int32_array(op, "rows", rows)
    chk.int32_array(op, "block_expert", block_expert)
    if rows.ndim != 1 or block_expert.ndim != 1 or block_expert.shape[0] < 1:
        raise ValueError(f"{op}: rows and block_expert must be 1-D (from moe_align), got "
                         f"{chk.desc(rows)}, {chk.desc(block_expert)}")  # fmt: skip
    nb = block_expert.shape[0]
    bm, rem = divmod(rows.shape[0], nb)
    if rem or bm < 16 or bm > 256 or bm & (bm - 1):
        raise ValueError(f"{op}: rows ({rows.shape[0]}) must hold block_m slots for each of the "
                         f"{nb} blocks, block_m a power of two in [16, 256]")  # fmt: skip
    r_rows = x.shape[0] * k
    if row_scale is not None:
        chk.array(op, "row_scale", row_scale)
        if row_scale.shape != (r_rows,) or row_scale.dtype.name not in ("float32", "float64"):
            raise ValueError(f"{op}: row_scale must be float32 or float64 [{r_rows}], got "
                             f"{chk.desc(row_scale)}")  # fmt: skip
    chk.out_arg(op, out, (r_rows, n), x.dtype)
    if out is not None and not out.is_contiguous():
        raise ValueError(f"{op}: out must be contiguous, got {chk.desc(out)}")
    return bm, k


def _expert_shape(op: str, x: GPUArray, w: Any, w_up: Any) -> tuple[int, int, int]:
    """(E, N, K) of GGUF-quantized experts (QuantizedWeight.from_blocks(..., experts=E)), after
    checking x and w_up against them."""
    if not w.is_gguf:
        raise TypeError(f"{op}: a quantized w must be in a GGUF format, got {w.format}")
    if x.ndim != 2:
        raise ValueError(f"{op}: x must be [rows, K], got {chk.desc(x)}")
    if x.dtype.name == "float64":
        raise TypeError(f"{op}: x must be float16, bfloat16 or float32 with quantized experts")
    e = w.experts
    n, k_dim = w.shape[0] // e, w.shape[1]
    if x.shape[1] != k_dim:
        raise ValueError(f"{op}: x has K={x.shape[1]} but the experts are [{e}, {n}, {k_dim}]")
    if x.device != w.device:
        raise ValueError(f"{op}: x is on {x.device} but w is on {w.device}")
    if w_up is not None and not (
        isinstance(w_up, QuantizedWeight)
        and (w_up.format, w_up.shape, w_up.experts) == (w.format, w.shape, e)
        and w_up.device == w.device
    ):
        raise ValueError(f"{op}: w_up must be a QuantizedWeight like w ({w!r}), got {w_up!r}")
    return e, n, k_dim
