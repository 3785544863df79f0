"""Decode attention against a KV cache (flash-decoding) and the KV-cache write with fused RoPE.

Numerics of pygpukit/backends/cpu/attention_decode.py. sdpa_decode: scores, softmax statistics
and the accumulator in float32, one rounding at the store; fp32 inputs use tl.dot with
input_precision="ieee" (no tf32), fp16/bf16 use tensor cores with fp32 accumulation and the
probabilities rounded to v's dtype before p @ v (as FlashAttention does); base-2 softmax with
log2(e) folded into the scale (Dao 2023). kv_cache_write (kv_write.py) is re-exported here: the
routing table serves both ops from this family, and sdpa_decode_append (the write and the
attention in one launch: each split writes the new tokens among its keys, then attends with q
rotated in registers; APPEND below).

sdpa_decode design (Dao et al. 2023, "Flash-Decoding"; FlashInfer's split-KV):
- One program per (sequence, kv head, row tile, key split). The GROUP query heads that share a kv
  head and the Sq new tokens are packed into the rows of one tile (row r = head g * Sq + token i),
  so each K/V byte is loaded once per kv head and the tile fills tl.dot's 16 rows.
- Lengths are read on the device: the grid depends only on the shapes (S_max, or max_blocks *
  block_size for a paged cache), and a split that starts past its sequence's length exits at
  once. The same launch therefore replays under a CUDA graph with new lengths.
- Splits: enough programs for PROGRAMS_PER_SM per multiprocessor (batch 1 with a long context
  fills the GPU), never chunks shorter than MIN_SPLIT_KEYS. The keys a split takes follow the
  length read on the device (_support/scratch.split_chunk): the length's blocks spread over the
  splits, at least the class's floor a split (MIN_SPLIT_KEYS, FEW_MIN_SPLIT_KEYS) and at most
  the capacity's chunk, and in the few-programs class a sequence of up to FEW_ONE_SPLIT_KEYS
  keys takes one split; a sequence far shorter than its cache no longer runs on a few long
  splits with the rest idle. Launches with few (sequence, kv head)
  programs (batch 1-4) on a contiguous cache form their own class with their own knobs (FEW_*):
  there the splits carry all the parallelism and a single wave of one program per SM wins,
  and the probabilities' row sums are kept by column and summed once after the key loop
  (FEW_ROW_SUMS_LAST: three CTA barriers a key block fewer on a chain that is latency-bound).
  Each split writes its normalised partial output and log2-sum-exp (fp32) to a workspace; a
  sequence that fits one chunk writes its output directly. With FUSED_COMBINE the last split of
  a (sequence, head, tile) to finish (an atomic counter per tile, acq_rel at GPU scope after a
  CTA barrier, the CUTLASS semaphore pattern) combines the partials and resets its counter to 0,
  so no second kernel is launched and the counter is ready for the next launch or graph
  replay; otherwise a small combine kernel runs. The combine (attention_combine.py) works on a
  flat row * D axis with the split axis inside each thread (no barrier per reduction): at batch
  1 that tail fell from 4.6 to 1.4 us.
- Paged caches gather each key block's pages through the block table (one scalar lookup per
  block when a page holds whole key blocks), the table entries loaded one block ahead so the
  K/V loads pipeline as deeply as the contiguous cache's. Keys stream through shared memory
  with num_stages software pipelining (cp.async); D is the contiguous axis: 16-byte copies.
- Lengths outside [0, capacity] and block ids outside the cache turn that sequence's output into
  NaN (never an out-of-bounds read): the host cannot check device values without a sync.
- On sm_90+ the kernel releases the output projection's GEMV (programmatic dependent launch)
  once it may run, when it combines its own splits or has one. PDL_LAUNCH (on) launches the
  kernel itself early, waiting on the cache write before it reads.
The workspace (partials, counters; pygpukit/backends/_support/scratch.py, shared with the native
twin) is kept per (device, stream) and grows but is never freed, so a captured graph never points at
released memory.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math
from typing import NamedTuple

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from pygpukit import determinism
from pygpukit.backends._support.scratch import decode_workspace, key_splits
from pygpukit.backends._support.weights import weights_are_constant
from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, new_out, next_pow2, sm_count
from pygpukit.backends.triton_kernels._decode_block import _decode_block, _table
from pygpukit.backends.triton_kernels.attention_combine import _combine, _store_out
from pygpukit.backends.triton_kernels.driver import launch, pdl_enabled
from pygpukit.backends.triton_kernels.kv_write import (  # the family's other op, its helpers
    _append_tokens,
    _rope_rows,
    kv_cache_write,
)

__all__ = ["DecodePlan", "decode_plan", "kv_cache_write", "sdpa_decode", "sdpa_decode_append"]

LOG2E = 1.4426950408889634

# Tuning knobs, read at every call (tuning/tune_decode.py sweeps them on the GPU). H200 sweep
# (2026-11-21, bf16 H32/Hkv8 D128, batch 16, contexts 4096-32768, L2 evicted by a read): BLOCK_N
# 64 / 4 warps / 3 stages has the best geometric mean over the contiguous cache and paged caches
# of 16- and 64-slot pages, which it keeps within 0-5% of the contiguous one; BLOCK_N 128 / 2
# stages (chosen earlier, under a memset flush) matches it on the contiguous cache but leaves the
# pages 9-17% behind (a 128-key block spans pages: one table lookup a key instead of a block).
BLOCK_N = 64  # keys per loop iteration
NUM_WARPS = 4
NUM_STAGES = 3  # fp16/bf16; fp32 tiles are twice the bytes and use 2
PROGRAMS_PER_SM = 2  # split target: about this many programs per multiprocessor
MIN_SPLIT_KEYS = 256  # no split shorter than this (a program's fixed cost needs bytes to hide)
MAX_SPLITS = 64
MAX_BLOCK_M = 64  # packed query rows per program; more rows make more tiles
FUSED_COMBINE = True  # the last split combines (one kernel); False: a separate combine kernel
# True: on sm_90+ (driver.pdl_enabled) the kernel is launched with programmatic dependent launch
# (its programs become resident while the kernel before it, the cache write, finishes, and wait
# on it with gdc_wait before they read anything it may write). With the cache write launched
# early too, the batch-1 decode step ran 0.3-0.8% faster on an H200 than with both launched
# plainly (kv_write.py has the numbers; benchmarks/tuning/decode_ab.py --experiment pdl
# measures it). False: the plain launch. The release of the next kernel (RELEASE) does not
# depend on it.
PDL_LAUNCH = True
# True: inside the engine's forward (backends/_support/weights.constant_weights: the step's
# lengths are written before it starts, never by the kernel ahead) each program loads its
# sequence's length before it waits, so the first key block's loads follow the wait at once.
# The result is the same either way; with kv_write.PREFETCH_POSITIONS the step ran 0.8% faster
# (Llama-3.2-1B shape, H100; kv_write.py has the numbers).
PREFETCH_LENGTHS = True
# The few-programs class: launches whose (sequence, kv head, row tile) programs number at most
# sms / FEW_SPLITS_NEEDED (batch 1-4 at 8 kv heads on 132 SMs), on a contiguous cache (and, with
# FEW_PAGED, on pages that hold whole FEW_BLOCK_N blocks), so the splits carry the parallelism;
# the knobs above serve every other launch. One program per SM in a single wave: with
# PROGRAMS_PER_SM programs a wave would pay a program's fixed cost (the length load, pipeline
# fill, partial store, counter) on each SM twice. H200 sweeps (tuning/tune_decode.py --stage
# few, 2026-11-21, bf16 Hq32/Hkv8 D128, L2 flushed by a read): 64-key blocks, 4 stages beat 3
# (B1 S32768 3236 vs 3071 GB/s, B4 S8192 3396 vs 3235). With the flat combine (_combine) the
# 64-slot pages are 2-5% faster in the default class than in this one (B1 S32768 3303 vs 3161
# GB/s, B4 S8192 3393 vs 3226), so FEW_PAGED is off.
FEW_SPLITS_NEEDED = 4  # 0: no launch is in the class
FEW_BLOCK_N = 64
FEW_NUM_WARPS = 4
FEW_NUM_STAGES = 4  # fp16/bf16; fp32 uses 2
FEW_PROGRAMS_PER_SM = 1
FEW_MIN_SPLIT_KEYS = 128
# The keys are split by the length on the device (_support/scratch.LENGTH_CHUNKS): up to
# FEW_ONE_SPLIT_KEYS keys one split (even past a short cache's chunk), past it splits of at
# least FEW_MIN_SPLIT_KEYS. H200, the Llama-3.2-1B shape's batch-1 step (benchmarks/tuning/
# decode_ab.py --experiment length-chunks, 2026-11-29): at about 216 keys one split took
# 801-803 us a step against 816-817 with two of 128; at 600 keys (4096-slot cache) five splits
# of 128 took 821 us against 837 with three of 256, at 2000 keys (8192 slots) 834 against 844
# (Qwen3-8B 4249 against 4296).
FEW_ONE_SPLIT_KEYS = 256
FEW_FUSED_COMBINE = True
# True: in the few-programs class every key block of a split runs in the masked loop, so a
# split's blocks stream through one software pipeline; False: the blocks every row sees run in
# an unmasked loop and the last one or two in a second, masked loop, whose loads start only
# when the first loop ends (at batch 1 and about 144 keys: two 64-key blocks, then one). H200,
# 2026-11-29 (benchmarks/tuning/decode_ab.py --experiment attention-loop, one process, two
# rounds), the batch-1 step in the 32-step graph: 781.8-782.1 against 792.2-792.6 us
# (Llama-3.2-1B shape), 4129.7-4132.2 against 4154.8-4159.8 us (Qwen3-8B). The masked path
# rounds the softmax's scaled scores in its own order, so the tokens of random-weight models
# differ from the two-loop build's (both against float64 in the tests); the deterministic plan
# runs every launch this way already.
FEW_ONE_LOOP = True
FEW_PAGED = False  # True: paged caches whose pages hold whole FEW_BLOCK_N blocks join the class
# True: in the few-programs class with up to 16 packed rows (the shapes measured; a 64-row
# tile would hold 32 more registers a thread across the loop) the probabilities' row sums are
# kept by column (rescaled like the accumulator) and summed over the row once after the key
# loop, instead of one sum a key block: the sm_90 SASS of the 4-warp kernel spends 9 CTA
# barriers and 414 instructions a warp on a 64-key block (3 barriers the row maximum, 3 the
# row sum; Nsight Compute at 256 keys: 0.15 instructions a cycle a scheduler), and the batch-1
# step grows by about 12.6 us a 64-key block (Llama-3.2-1B shape, 0.79 us a layer). The row
# sum's order changes (one sum of the rescaled columns), so the bits of the softmax's
# denominator differ from the sum a block. H200, 2026-11-30 (benchmarks/tuning/decode_ab.py
# --experiment attention-positions, a step in the 32-step graph, two rounds): at 225-256 keys
# 774.6-774.9 against 780.4-780.5 us (Llama-3.2-1B shape) and 4002.2-4002.5 against
# 4026.6-4026.7 us (Qwen3-8B), level at one key block; a block now costs the step 10.8 us
# against 12.7 (Llama-3.2-1B).
FEW_ROW_SUMS_LAST = True
# Partial-output elements one combine step holds in registers (BLOCK_S splits at a time). H200,
# batch 1, 16 splits of D128 x 4 rows: 4096 (two steps of 8 splits) finished the fused combine in
# 1.4 us, 16384 (one step) in 2.1 us.
COMBINE_ELEMS = 4096
# The deterministic mode's plan (pygpukit/determinism.py): every launch shape that enters a
# row's arithmetic is fixed, whatever the batch, Sq or capacity. A split covers FIXED_SPLIT_KEYS
# keys (a multiple of BLOCK_N), rows are packed FIXED_BLOCK_M to a tile (tl.dot's smallest), a
# partial is FIXED_BLOCK_M rows, and the combine takes COMBINE_ELEMS // (rows * BLOCK_D) splits a
# step. Every key block takes the masked path (the unmasked one may contract the scale into the
# softmax shift differently), the launch compiles without FMA contraction, and a block or split
# past a row's keys leaves its sums exactly as they were, so the row of a k-token check equals
# the 1-token step at the same position bit for bit.
FIXED_SPLIT_KEYS = 256
FIXED_BLOCK_M = 16


@triton.jit
def _seq_len(LENS, b, cap, chunk, floor, solo, NS, BLOCK_N: tl.constexpr, CG: tl.constexpr):
    """(length, bad, active splits, keys a split takes): a length outside [0, cap] counts as 0
    keys and poisons. The length's blocks spread over the NS splits, within [floor, chunk]; up
    to solo keys one split (_support/scratch.split_chunk; floor == chunk and solo 0: the
    capacity's split at every length).
    CG: read at L2 (the length loaded before the wait on the kernel ahead)."""
    if CG:
        L = tl.load(LENS + b, cache_modifier=".cg")
    else:
        L = tl.load(LENS + b)
    bad = (L < 0) | (L > cap)
    L = tl.where(bad, 0, L)
    blocks = tl.cdiv(L, BLOCK_N)
    c = tl.minimum(chunk, tl.maximum(floor, tl.cdiv(blocks, NS) * BLOCK_N))
    c = tl.where(L <= solo, tl.maximum(c, blocks * BLOCK_N), c)  # one split, past chunk too
    return L, bad, tl.maximum(tl.cdiv(L, c), 1), c


@triton.jit
def _decode_fwd(
    Q, K, V, LENS, BT, Out, WO, WL, CNT, qk_scale, Hkv, Sq, R, D, cap, nblocks, chunk, floor, solo,
    NS, TILES,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, so3, sbt0, sbt1,
    # sdpa_decode_append: the new tokens' k, v and kv_cache_write's rotation and head norms
    KN, VN, COS, SIN, QNW, KNW, eps, HALF, max_pos, skn0, skn1, skn2, skn3, svn0, svn1, svn2,
    svn3, scr, scc, ssr, ssc,
    GROUP: tl.constexpr, CAUSAL: tl.constexpr, PAGED: tl.constexpr,
    PAGE: tl.constexpr, SPLIT: tl.constexpr, FUSED: tl.constexpr, PREC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_S: tl.constexpr, EVEN_D: tl.constexpr, ALL_MASKED: tl.constexpr, RELEASE: tl.constexpr,
    PDL: tl.constexpr, PREFETCH: tl.constexpr,
    APPEND: tl.constexpr, ROPE: tl.constexpr, GPTJ: tl.constexpr, Q_NORM: tl.constexpr,
    K_NORM: tl.constexpr, CT: tl.constexpr, BLOCK_T: tl.constexpr, ROW_SUMS_LAST: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # (sequence, kv head, row tile)
    split = tl.program_id(1)
    tile = pid % TILES
    bh = pid // TILES
    b = bh // Hkv
    hk = bh - b * Hkv
    if PREFETCH:  # no kernel that may still run writes the lengths (PREFETCH_LENGTHS)
        L, bad_len, n_act, keys = _seq_len(LENS, b, cap, chunk, floor, solo, NS, BLOCK_N, CG=True)
    if PDL:  # launched early (programmatic dependent launch): q and the caches (and the
        gdc_wait()  # lengths) may be the previous kernel's, read only after it has finished
    if RELEASE:  # the next kernel (the output projection's GEMV) may launch now
        gdc_launch_dependents()
    if not PREFETCH:
        L, bad_len, n_act, keys = _seq_len(LENS, b, cap, chunk, floor, solo, NS, BLOCK_N, CG=False)
    if split < n_act:  # splits past the sequence's length do nothing
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        rmask = rows < R
        g = rows // Sq
        qi = rows - g * Sq  # query token of each row
        head = (hk * GROUP + g).to(tl.int64)
        d = tl.arange(0, BLOCK_D)
        qp = Q + b.to(tl.int64) * sq0 + head[:, None] * sq1 + qi.to(tl.int64)[:, None] * sq2
        lo = split * keys  # this length's keys a split (_seq_len), not the capacity's chunk
        top = tl.minimum(lo + keys, L)
        if APPEND:
            # q rotated (and normalised) in registers at its token's cache position, rounded
            # once as kv_cache_write stores it; the new tokens of this split's keys written
            # into the cache, then read back by the key loop below after a CTA barrier (the
            # other splits never read them): the write's launch and its wait are saved (measured
            # slower in the engine's step: decode_forms.APPEND_ATTENTION).
            qv = _rope_rows(qp, sq3, rmask[:, None], L - Sq + qi, COS, SIN, QNW, eps, D, HALF,
                            max_pos, scr, scc, ssr, ssc, CT=CT, ROPE=ROPE, GPTJ=GPTJ,
                            NORM=Q_NORM, BLOCK_D=BLOCK_D)  # fmt: skip
            q = tl.where(rmask[:, None], qv.to(Q.dtype.element_ty), 0.0)
            _append_tokens(
                K, V, KN, VN, BT, COS, SIN, KNW, eps, b, hk, L, lo, top, Sq, D, HALF, cap,
                nblocks, max_pos, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, skn0, skn1, skn2,
                skn3, svn0, svn1, svn2, svn3, sbt0, sbt1, scr, scc, ssr, ssc,
                PAGED=PAGED, PAGE=PAGE, ROPE=ROPE, GPTJ=GPTJ, K_NORM=K_NORM, CT=CT,
                BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D,
            )  # fmt: skip
            tl.debug_barrier()  # every thread's cache stores precede the key loads
        else:
            q = tl.load(qp + d[None, :] * sq3, mask=rmask[:, None] & (d < D)[None, :], other=0.0)
        if PAGED:
            kb = hk.to(tl.int64) * sk1
            vb = hk.to(tl.int64) * sv1
            bt_row = b.to(tl.int64) * sbt0
        else:
            kb = b.to(tl.int64) * sk0 + hk.to(tl.int64) * sk1
            vb = b.to(tl.int64) * sv0 + hk.to(tl.int64) * sv1
            bt_row = b.to(tl.int64) * 0
        lim = qi + L - Sq  # row sees keys j <= lim (causal, end-aligned)
        # Keys [0, full) are visible to every row; blocks past it up to L need the mask.
        if CAUSAL:
            full = tl.maximum(L - Sq + 1, 0)
        else:
            full = L
        if ALL_MASKED:  # every block in the masked loop (the deterministic plan: a row's
            # arithmetic never depends on Sq; FEW_ONE_LOOP: one pipelined loop, not two)
            mid = lo
        else:
            mid = tl.maximum(tl.minimum(full // BLOCK_N * BLOCK_N, top), lo)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        if ROW_SUMS_LAST:
            l_i = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        else:
            l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        bad = tl.zeros([BLOCK_N], tl.int1)
        # The unmasked blocks. A paged cache's table entries are loaded one block ahead: K/V
        # addresses that depend on a load of the same iteration get a single pipeline buffer
        # (Triton 3.6 on sm_90: 39 KB of shared memory at num_stages=3 instead of 70 KB).
        nxt = _table(BT, bt_row, lo, mid, sbt1, PAGE=PAGE, BLOCK_N=BLOCK_N) if PAGED else 0
        for start in range(lo, mid, BLOCK_N):
            cur = nxt
            if PAGED:
                nxt = _table(BT, bt_row, start + BLOCK_N, mid, sbt1, PAGE=PAGE, BLOCK_N=BLOCK_N)
            acc, m_i, l_i, bad = _decode_block(
                acc, m_i, l_i, bad, q, K, V, cur, kb, vb, start, L, lim, nblocks, qk_scale,
                sk0, sk2, sk3, sv0, sv2, sv3, d, D,
                MASKED=False, CAUSAL=CAUSAL, PAGED=PAGED, PAGE=PAGE, EVEN_D=EVEN_D, PREC=PREC,
                BLOCK_N=BLOCK_N, ROW_SUMS_LAST=ROW_SUMS_LAST,
            )  # fmt: skip
        # The tail (one or two blocks when Sq <= BLOCK_N), or every block (ALL_MASKED).
        for start in range(mid, top, BLOCK_N):
            phys = _table(BT, bt_row, start, L, sbt1, PAGE=PAGE, BLOCK_N=BLOCK_N) if PAGED else 0
            acc, m_i, l_i, bad = _decode_block(
                acc, m_i, l_i, bad, q, K, V, phys, kb, vb, start, L, lim, nblocks, qk_scale,
                sk0, sk2, sk3, sv0, sv2, sv3, d, D,
                MASKED=True, CAUSAL=CAUSAL, PAGED=PAGED, PAGE=PAGE, EVEN_D=EVEN_D, PREC=PREC,
                BLOCK_N=BLOCK_N, ROW_SUMS_LAST=ROW_SUMS_LAST,
            )  # fmt: skip
        if ROW_SUMS_LAST:
            l_i = tl.sum(l_i, axis=1)
        seen = l_i > 0.0
        o = acc / tl.where(seen, l_i, 1.0)[:, None]  # rows that saw no key: acc is 0 -> zeros
        poison = bad_len | (tl.max(bad.to(tl.int32), axis=0) > 0)
        o = tl.where(poison, float("nan"), o)
        omask = rmask[:, None] & (d < D)[None, :]
        if not SPLIT:
            _store_out(Out, o, b, hk, rows[:, None], d[None, :], omask, Sq, so0, so1, so2, so3,
                       GROUP=GROUP)  # fmt: skip
        elif n_act == 1:  # the sequence fits one chunk: no partials
            _store_out(Out, o, b, hk, rows[:, None], d[None, :], omask, Sq, so0, so1, so2, so3,
                       GROUP=GROUP)  # fmt: skip
        else:
            r = tl.arange(0, BLOCK_M)
            prow = (pid.to(tl.int64) * NS + split) * BLOCK_R + r
            pmask = rmask & (r < BLOCK_R)
            tl.store(WO + prow[:, None] * BLOCK_D + d[None, :], o, mask=pmask[:, None])
            lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
            tl.store(WL + prow, lse, mask=pmask)
            if FUSED:
                # Every thread's partial stores precede the release of the counter (bar.sync,
                # then a cumulative acq_rel atomic); the last arrival acquires them all.
                tl.debug_barrier()
                done = tl.atomic_add(CNT + pid, 1, sem="acq_rel", scope="gpu")
                if done == n_act - 1:
                    _combine(
                        Out, WO, WL, pid, n_act, NS, b, hk, tile, Sq, R, D, so0, so1, so2, so3,
                        GROUP=GROUP, BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D, BLOCK_R=BLOCK_R,
                        BLOCK_S=BLOCK_S,
                    )  # fmt: skip
                    tl.store(CNT + pid, 0)  # ready for the next launch / graph replay


@triton.jit
def _decode_combine(
    Out, WO, WL, LENS, Hkv, Sq, R, D, cap, chunk, floor, solo, NS, TILES, so0, so1, so2, so3,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # The unfused combine: one program per (sequence, kv head, row tile).
    pid = tl.program_id(0)
    tile = pid % TILES
    bh = pid // TILES
    b = bh // Hkv
    hk = bh - b * Hkv
    _len, _bad, n_act, _keys = _seq_len(LENS, b, cap, chunk, floor, solo, NS, BLOCK_N, CG=False)
    if n_act > 1:  # one split wrote the output itself
        _combine(
            Out, WO, WL, pid, n_act, NS, b, hk, tile, Sq, R, D, so0, so1, so2, so3,
            GROUP=GROUP, BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D, BLOCK_R=BLOCK_R, BLOCK_S=BLOCK_S,
        )  # fmt: skip


class DecodePlan(NamedTuple):
    """Launch shape of one sdpa_decode call; a function of the shapes only (never the lengths)."""

    block_m: int  # packed query rows per program
    tiles: int  # row tiles per (sequence, kv head)
    block_n: int  # keys per iteration
    splits: int  # key splits (grid axis 1)
    chunk: int  # keys per split at full capacity, a multiple of block_n
    floor: int  # fewest keys per split (the kernel spreads a length's blocks within [floor, chunk])
    solo: int  # a sequence of up to this many keys takes one split (0: none)
    block_r: int  # rows of a partial output in the workspace
    block_s: int  # splits per combine step
    num_warps: int
    num_stages: int
    fused: bool  # the last split combines (else a combine kernel runs)
    few: bool  # the few-programs class (FEW_* knobs)
    fixed: bool = False  # the deterministic mode's plan
    row_sums_last: bool = False  # the row sums summed once after the key loop (FEW_ROW_SUMS_LAST)


def decode_plan(
    batch: int,
    heads: int,
    kv_heads: int,
    sq: int,
    head_dim: int,
    capacity: int,
    half: bool,
    sms: int,
    *,
    num_splits: int | None = None,
    page: int = 0,
    few: bool | None = None,
    fixed: bool = False,
) -> DecodePlan:
    """The launch shape for q [batch, heads, sq, head_dim] over ``capacity`` cache slots per
    sequence on a device with ``sms`` multiprocessors; page: slots per page of a paged cache (0:
    contiguous). num_splits forces the split count, few the knob class (tests, tuning); fixed:
    the deterministic mode's batch-invariant plan."""
    rows = heads // kv_heads * sq
    if fixed:
        bm, bd = FIXED_BLOCK_M, max(16, next_pow2(head_dim))
        ns = max(1, cdiv(capacity, FIXED_SPLIT_KEYS))
        bs = max(2, COMBINE_ELEMS // (bm * bd))
        return DecodePlan(
            bm, cdiv(rows, bm), BLOCK_N, ns, FIXED_SPLIT_KEYS, FIXED_SPLIT_KEYS, 0, bm, bs,
            NUM_WARPS,
            NUM_STAGES if half else 2, bool(FUSED_COMBINE), False, True,
        )  # fmt: skip
    bm = max(16, min(next_pow2(rows), MAX_BLOCK_M))
    tiles = cdiv(rows, bm)
    progs = batch * kv_heads * tiles
    if few is None:
        few = 0 < FEW_SPLITS_NEEDED and progs * FEW_SPLITS_NEEDED <= sms
        few = few and (page == 0 or (FEW_PAGED and page % FEW_BLOCK_N == 0))
    if few:
        bn, warps, stages, per_sm = FEW_BLOCK_N, FEW_NUM_WARPS, FEW_NUM_STAGES, FEW_PROGRAMS_PER_SM
        min_keys, solo, fused = FEW_MIN_SPLIT_KEYS, FEW_ONE_SPLIT_KEYS, FEW_FUSED_COMBINE
    else:
        bn, warps, stages, per_sm = BLOCK_N, NUM_WARPS, NUM_STAGES, PROGRAMS_PER_SM
        min_keys, solo, fused = MIN_SPLIT_KEYS, 0, FUSED_COMBINE
    bd = max(16, next_pow2(head_dim))
    ns, chunk, floor, solo = key_splits(
        capacity, bn, progs, per_sm * sms, min_keys=min_keys, max_splits=MAX_SPLITS,
        forced=num_splits, one_split_keys=solo,
    )  # fmt: skip
    br = bm if tiles > 1 else max(2, next_pow2(rows))
    bs = max(2, min(next_pow2(ns), COMBINE_ELEMS // (br * bd)))
    stages = stages if half else 2
    return DecodePlan(
        bm, tiles, bn, ns, chunk, floor, solo, br, bs, warps, stages, bool(fused), bool(few),
        row_sums_last=bool(few and FEW_ROW_SUMS_LAST and bm <= 16),
    )  # fmt: skip


def sdpa_decode(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    cache_seqlens: GPUArray,
    block_table: GPUArray | None = None,
    *,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """q [B, H, Sq, D] over a contiguous [B, Hkv, S_max, D] or paged [num_blocks, Hkv,
    block_size, D] cache (with block_table) -> [B, H, Sq, D], written into out= when given."""
    return _sdpa_decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, out)


class Append(NamedTuple):
    """sdpa_decode_append's new tokens and their rotation (kv_cache_write's arguments)."""

    k: GPUArray  # [B, Hkv, Sq, D]
    v: GPUArray
    cos: GPUArray | None
    sin: GPUArray | None
    q_norm: GPUArray | None
    k_norm: GPUArray | None
    eps: float
    gptj: bool


# New tokens an iteration of the append's write (a fixed tile: a token's arithmetic is the same
# whatever Sq). sm_90a, bf16, the few-programs plan (ptxas -v): 8 keeps the D 64 kernel at 195
# registers a thread (16: 254) and the D 128 kernel's spills at 20 bytes (16: 72; without the
# append 24).
APPEND_TOKENS = 8


def sdpa_decode_append(
    q: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    k: GPUArray,
    v: GPUArray,
    cache_seqlens: GPUArray,
    block_table: GPUArray | None = None,
    cos: GPUArray | None = None,
    sin: GPUArray | None = None,
    *,
    rope_style: str = "neox",
    q_norm: GPUArray | None = None,
    k_norm: GPUArray | None = None,
    norm_eps: float = 0.0,
    qk_norm: bool = False,
    causal: bool = True,
    scale: float | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """kv_cache_write of k, v at cache_seqlens[b] - Sq + j (q rotated in registers, not in place)
    and sdpa_decode over cache_seqlens[b] keys, in one launch; qk_norm is the routing table's
    mark of a call with head norms."""
    app = Append(k, v, cos, sin, q_norm, k_norm, float(norm_eps), rope_style == "gptj")
    return _sdpa_decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, out,
                        append=app)  # fmt: skip


def _sdpa_decode(
    q: GPUArray,
    k: GPUArray,
    v: GPUArray,
    lens: GPUArray,
    bt: GPUArray | None,
    causal: bool,
    scale: float | None,
    out: GPUArray | None,
    *,
    num_splits: int | None = None,
    fused: bool | None = None,
    few: bool | None = None,
    append: Append | None = None,
) -> GPUArray:
    """sdpa_decode with the split count, the combine and the knob class forced (tests, tuning);
    with append, sdpa_decode_append."""
    if q.dtype.name not in ("float32", "float16", "bfloat16"):
        raise TypeError(
            f"sdpa_decode (triton): dtype {q.dtype.name} is not supported "
            "(float16, bfloat16, float32)"
        )
    o = new_out(out, q.shape, q.dtype, q)
    batch, h, sq, d = q.shape
    hkv = k.shape[1]
    if batch * h * sq * d == 0:
        return o
    paged = bt is not None
    cap = k.shape[2] * (bt.shape[1] if bt is not None else 1)
    half = q.dtype.name != "float32"
    pl = decode_plan(
        batch, h, hkv, sq, d, cap, half, sm_count(q), num_splits=num_splits,
        page=k.shape[2] if paged else 0, few=few,
        fixed=num_splits is None and few is None and determinism.is_deterministic(),
    )  # fmt: skip
    fuse = pl.fused if fused is None else fused
    nbh = batch * hkv * pl.tiles
    bd = max(16, next_pow2(d))
    wo = wl = cnt = o
    if pl.splits > 1:
        ws = decode_workspace(q.device, nbh * pl.splits * pl.block_r, bd, nbh if fuse else 0)
        assert ws.parts is not None and ws.lse is not None
        wo, wl = ws.parts, ws.lse
        if fuse:
            assert ws.cnt is not None
            cnt = ws.cnt
    sm_scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    sbt = tuple(bt.element_strides) if bt is not None else (0, 0)
    so = tuple(o.element_strides)
    group = h // hkv
    release = pdl_enabled(q.device)
    pdl = PDL_LAUNCH and release
    ap = append
    rope = ap is not None and ap.cos is not None and ap.sin is not None
    if ap is not None and not rope and (ap.q_norm is not None or ap.k_norm is not None):
        raise ValueError("sdpa_decode_append: q_norm / k_norm need the rotary tables cos, sin")
    tc = tuple(ap.cos.element_strides) if rope and ap is not None and ap.cos is not None else (0, 0)
    ts = tuple(ap.sin.element_strides) if rope and ap is not None and ap.sin is not None else (0, 0)
    launch(
        _decode_fwd, (nbh, pl.splits),
        q, k, v, lens, bt if bt is not None else lens, o, wo, wl, cnt, sm_scale * LOG2E,
        hkv, sq, group * sq, d, cap, k.shape[0], pl.chunk, pl.floor, pl.solo, pl.splits,
        pl.tiles,
        *q.element_strides, *k.element_strides, *v.element_strides, *so, *sbt,
        *_append_args(ap, q, rope, tc, ts),
        GROUP=group, CAUSAL=bool(causal), PAGED=paged,
        PAGE=k.shape[2] if paged else 1, SPLIT=pl.splits > 1, FUSED=fuse and pl.splits > 1,
        PREC="tf32" if half else "ieee",
        BLOCK_M=pl.block_m, BLOCK_N=pl.block_n, BLOCK_D=bd, BLOCK_R=pl.block_r,
        BLOCK_S=pl.block_s, EVEN_D=bd == d, ALL_MASKED=pl.fixed or (pl.few and FEW_ONE_LOOP),
        RELEASE=release and (fuse or pl.splits == 1), PDL=pdl,
        PREFETCH=PREFETCH_LENGTHS and weights_are_constant(),
        APPEND=ap is not None, ROPE=rope, GPTJ=ap is not None and ap.gptj,
        Q_NORM=ap is not None and ap.q_norm is not None,
        K_NORM=ap is not None and ap.k_norm is not None, CT=tl.float32, BLOCK_T=APPEND_TOKENS,
        ROW_SUMS_LAST=pl.row_sums_last, launch_pdl=pdl, num_warps=pl.num_warps,
        num_stages=pl.num_stages, enable_fp_fusion=not pl.fixed,
    )  # fmt: skip
    if pl.splits > 1 and not fuse:
        launch(
            _decode_combine, (nbh,),
            o, wo, wl, lens, hkv, sq, group * sq, d, cap, pl.chunk, pl.floor, pl.solo,
            pl.splits, pl.tiles, *so, GROUP=group, BLOCK_M=pl.block_m, BLOCK_D=bd,
            BLOCK_R=pl.block_r, BLOCK_S=pl.block_s, BLOCK_N=pl.block_n, num_warps=pl.num_warps,
            enable_fp_fusion=not pl.fixed,
        )  # fmt: skip
    return o


def _append_args(
    ap: Append | None, q: GPUArray, rope: bool, tc: tuple[int, ...], ts: tuple[int, ...]
) -> tuple[object, ...]:
    """_decode_fwd's append arguments in order (q standing in for absent arrays: never read)."""
    if ap is None:
        return (q,) * 6 + (0.0, 0, 0) + (0,) * 12
    half = ap.cos.shape[1] if rope and ap.cos is not None else 0
    return (
        ap.k, ap.v, ap.cos if rope else q, ap.sin if rope else q,
        ap.q_norm.contiguous() if ap.q_norm is not None else q,
        ap.k_norm.contiguous() if ap.k_norm is not None else q,
        ap.eps, half, ap.cos.shape[0] if rope and ap.cos is not None else 0,
        *ap.k.element_strides, *ap.v.element_strides, *tc, *ts,
    )  # fmt: skip
