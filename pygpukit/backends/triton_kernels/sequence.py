"""Viterbi decoding (pygpukit/ops/sequence.py's contract; the NumPy twin is
backends/cpu/sequence.py).

- ``_step_kernel``: one launch per step t, one program per (row, BLOCK_J target states). The
  program walks the source states k in chunks of BLOCK_K, forming the [BLOCK_K, BLOCK_J] tile
  V[t - 1, k] + log_trans[k, j] and keeping the running maximum and its first index (a later
  chunk wins only when strictly larger, so ties go to the lowest k as np.argmax does; the first
  NaN wins over everything). It writes ptr[t, j] and V[t, j] = log_prob[t, j] + max: the same
  two additions in the same dtype as the twin, so the paths agree exactly. V lives in two
  [batch, states] rows used alternately (only the previous step is read).
- ``_back_kernel``: one program per row: the first argmax of V[T - 1], then the T - 1 pointer
  reads back to step 0 (a chain of dependent scalar loads, sequential by nature).

The steps are separate launches because a step reads every state of the one before, which
programs of one launch cannot wait for; one launch per step costs a few microseconds each.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, new_out
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import int32

__all__ = ["viterbi"]

# A step's tile: BLOCK_K sources x BLOCK_J targets of one row. Narrow target blocks give many
# programs, which is what a short step needs. Measured on an H100 (1202 states, 626 steps, rows
# 32 / 4 / 1): 16 x 128 41 / 8.9 / 7.7 ms, 16 x 256 45 / 8.9 / 7.6, 32 x 64 48 / 17 / 17, 8 x
# 256 45 / 12 / 12; programs sharing one transition tile among several rows were slower at
# every row count (32 rows: 60 ms two rows a program, 140 ms four, 488 ms eight).
_BLOCK_J = 16
_BLOCK_K = 128
_WARPS = 4
_BLOCK_BACK = 1024


@triton.jit
def _chunk_argmax(s, pos, k0, axis: tl.constexpr, BIG: tl.constexpr):
    """(max, first index of it, any NaN) of s along ``axis`` (pos: the positions along it,
    broadcastable to s; indices offset by k0); when a NaN is present the max is NaN and the
    index the first NaN's. Two reductions: the first NaN's position, and Triton's (value,
    leftmost index) maximum of s with NaN read as -inf."""
    isn = s != s
    first_nan = tl.min(tl.where(isn, pos, BIG), axis)
    m, idx = tl.max(
        tl.where(isn, float("-inf"), s), axis, return_indices=True,
        return_indices_tie_break_left=True,
    )  # fmt: skip
    has_nan = first_nan < BIG
    return tl.where(has_nan, float("nan"), m), k0 + tl.where(has_nan, first_nan, idx), has_nan


@triton.jit
def _step_kernel(
    LP, LT, LPI, PREV, CUR, PTR, t, S,
    slp0, slp1, slp2, slt0, slt1, slpi, sptr0, sptr1,
    INIT: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK_J + tl.arange(0, BLOCK_J)
    jm = j < S
    lp = tl.load(LP + b * slp0 + t * slp1 + j * slp2, mask=jm, other=0.0)
    if INIT:
        val = lp + tl.load(LPI + j * slpi, mask=jm, other=0.0)
    else:
        best = tl.full([BLOCK_J], float("-inf"), lp.dtype)
        arg = tl.zeros([BLOCK_J], tl.int32)
        seen_nan = tl.zeros([BLOCK_J], tl.int1)
        for k0 in range(0, S, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            km = k < S
            v = tl.load(PREV + b * S + k, mask=km, other=float("-inf"))
            a = tl.load(
                LT + k.to(tl.int64)[:, None] * slt0 + j[None, :] * slt1,
                mask=km[:, None] & jm[None, :],
                other=float("-inf"),
            )
            # masked sources are -inf + -inf: never above a real candidate, and their indices
            # come after every real one on a tie at -inf
            pos = tl.arange(0, BLOCK_K)[:, None]
            m, idx, has_nan = _chunk_argmax(v[:, None] + a, pos, k0, 0, BLOCK_K)
            take = (~seen_nan) & (has_nan | (m > best))
            best = tl.where(take, m, best)
            arg = tl.where(take, idx, arg)
            seen_nan = seen_nan | has_nan
        val = lp + best
        tl.store(PTR + b * sptr0 + t * sptr1 + j, arg, mask=jm)
    tl.store(CUR + b * S + j, val, mask=jm)


@triton.jit
def _back_kernel(LAST, PTR, STATES, T, S, sptr0, sptr1, sst0, sst1, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    # loop-carried scalars typed up front (the compiled loop keeps their types)
    best = tl.full([], float("-inf"), LAST.dtype.element_ty)
    state = tl.full([], 0, tl.int32)
    seen_nan = tl.full([], 0, tl.int1)
    for k0 in range(0, S, BLOCK):
        k = k0 + tl.arange(0, BLOCK)
        v = tl.load(LAST + b * S + k, mask=k < S, other=float("-inf"))
        m, idx, has_nan = _chunk_argmax(v, tl.arange(0, BLOCK), k0, 0, BLOCK)
        take = (~seen_nan) & (has_nan | (m > best))
        best = tl.where(take, m, best)
        state = tl.where(take, idx, state)
        seen_nan = seen_nan | has_nan
    tl.store(STATES + b * sst0 + (T - 1) * sst1, state)
    for i in range(1, T):
        t = T - i
        state = tl.load(PTR + b * sptr0 + t * sptr1 + state)
        tl.store(STATES + b * sst0 + (t - 1) * sst1, state)


def viterbi(
    log_prob: GPUArray, log_trans: GPUArray, log_p_init: GPUArray, *, out: GPUArray | None = None
) -> GPUArray:
    b, n_steps, s = log_prob.shape
    states = new_out(out, (b, n_steps), int32, log_prob)
    if b == 0:
        return states
    dev = log_prob._device
    ptr = empty((b, n_steps, s), int32, dev)  # step 0's row is never read
    value = empty((2, b, s), log_prob.dtype, dev)
    grid = (b, cdiv(s, _BLOCK_J))
    strides = (*log_prob.element_strides, *log_trans.element_strides)
    for t in range(n_steps):
        prev, cur = value[(t + 1) % 2], value[t % 2]
        launch(
            _step_kernel, grid,
            log_prob, log_trans, log_p_init, prev, cur, ptr, t, s,
            *strides, log_p_init.element_strides[0], *ptr.element_strides[:2],
            INIT=t == 0, BLOCK_J=_BLOCK_J, BLOCK_K=_BLOCK_K, num_warps=_WARPS,
        )  # fmt: skip
    launch(
        _back_kernel, (b,),
        value[(n_steps - 1) % 2], ptr, states, n_steps, s,
        *ptr.element_strides[:2], *states.element_strides,
        BLOCK=min(_BLOCK_BACK, max(16, 1 << (s - 1).bit_length())), num_warps=4,
    )  # fmt: skip
    return states
