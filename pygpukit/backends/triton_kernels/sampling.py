"""The device sampler: one token per row of logits, drawn on the GPU (the algorithm and the
random stream of pygpukit/backends/cpu/sampling.py: Philox4x32-10 at counter[b], repetition
penalty, temperature, top-k, top-p, min-p, an inverse-CDF draw in index order).

One program per row; the row is read from L2 once per pass:
- pass 1: the maximum of the transformed logits x (penalty, then / temperature);
- top-k: bisection over the float32 order (keys: the bits, negatives with their magnitude bits
  flipped, so integer order is float order) for the k-th largest value: 32 counting passes;
- top-p: bisection for the smallest kept value whose tokens strictly above it hold less than
  top_p of the kept mass: 32 passes summing exp(x - max) in float32, block by block in order;
- the draw: the kept tokens' running sum in index order (tl.cumsum within a block, carried
  across blocks) against u x the total.
With 0 < top_k <= FAST_TOP_K (the usual setting) a faster plan replaces the bisections: each
program of a (row, chunk of CHUNK tokens) grid sorts its chunk (value, then index) and keeps its
first KC = candidates(top_k) > top_k; one program a row sorts the candidates, keeps the top_k
(and ties with the k-th), applies top-p in that order (the host sampler's), then min-p, and draws
in that order. A row where some chunk's KC-th candidate still ties the k-th value (more ties than
a chunk kept) is drawn by the bisection plan in the same program, which sees every token. The
plans and that rule are the NumPy twin's (pygpukit/backends/cpu/sampling.py).
Only the token ids leave the device (int32 [B]); the counter and the seen marks are updated in
place, so the kernel can sit inside a captured decode step. Every sum runs in a fixed order: the
same logits, seed and counter give the same token run to run and under graph replay.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math

import triton
import triton.language as tl

from pygpukit.backends.cpu.sampling import CHUNK, candidates, sorted_plan
from pygpukit.backends.triton_kernels._common import GPUArray, cdiv, new_out, next_pow2
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import int32

__all__ = ["sample"]

BLOCK = 2048
NUM_WARPS = 8


@triton.jit
def _key(x):
    """An int64 whose order is x's float32 order (-0.0 just below +0.0): the bits, negatives
    with their magnitude bits flipped (int64, so bisection midpoints never overflow)."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64)


@triton.jit
def _load_x(row, seen_row, start, V, sl1, ss1, pen, temp, PENALTY: tl.constexpr,
            GREEDY: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """x for tokens start..start+BLOCK-1 (-inf past V): penalized, then divided by temp."""
    i = start + tl.arange(0, BLOCK)
    ok = i < V
    x = tl.load(row + i.to(tl.int64) * sl1, mask=ok, other=float("-inf")).to(tl.float32)
    if PENALTY:
        s = tl.load(seen_row + i.to(tl.int64) * ss1, mask=ok, other=0)
        x = tl.where(s != 0, tl.where(x < 0, x * pen, x / pen), x)
    if not GREEDY:
        x = x / temp
    # One order for every plan: NaN counts as -inf (never drawn), -0.0 as +0.0.
    x = tl.where(x == x, x + 0.0, float("-inf"))
    return tl.where(ok, x, float("-inf")), i, ok


@triton.jit
def _sample_kernel(
    L, SEEN, CNT, OUT, V, sl0, sl1, ss0, ss1, seed, temp, pen, top_k, top_p, log_min_p,
    PENALTY: tl.constexpr, MARK: tl.constexpr, GREEDY: tl.constexpr, TOP_K: tl.constexpr,
    TOP_P: tl.constexpr, MIN_P: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    _draw_row(
        L, SEEN, CNT, OUT, tl.program_id(0), V, sl0, sl1, ss0, ss1, seed, temp, pen, top_k, top_p,
        log_min_p, PENALTY=PENALTY, MARK=MARK, GREEDY=GREEDY, TOP_K=TOP_K, TOP_P=TOP_P,
        MIN_P=MIN_P, BLOCK=BLOCK,
    )  # fmt: skip


@triton.jit
def _draw_row(
    L, SEEN, CNT, OUT, b, V, sl0, sl1, ss0, ss1, seed, temp, pen, top_k, top_p, log_min_p,
    PENALTY: tl.constexpr, MARK: tl.constexpr, GREEDY: tl.constexpr, TOP_K: tl.constexpr,
    TOP_P: tl.constexpr, MIN_P: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The bisection plan for row b."""
    row = L + b.to(tl.int64) * sl0
    seen_row = SEEN + b.to(tl.int64) * ss0
    c = tl.load(CNT + b)
    # pass 1: the maximum (and, greedy, its first index)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    arg = tl.full([BLOCK], 2147483647, tl.int32)
    for start in range(0, V, BLOCK):
        x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp, PENALTY=PENALTY,
                           GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
        better = (x > m) | (ok & (arg == 2147483647))  # a row of -inf still names a token
        arg = tl.where(better, i, arg)
        m = tl.where(better, x, m)
    mx = tl.max(m, axis=0)
    if GREEDY:
        tok = tl.min(tl.where(m == mx, arg, 2147483647), axis=0)
    else:
        thr = _key(mx) * 0 - 2147483648  # the smallest key: every token kept
        if TOP_K:  # the largest key K with count(key >= K) >= top_k: the k-th largest value
            lo = thr
            hi = _key(mx)
            for _ in range(32):
                mid = lo + (hi - lo + 1) // 2
                cnt = 0
                for start in range(0, V, BLOCK):
                    x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp,
                                       PENALTY=PENALTY, GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
                    cnt += tl.sum((_key(x) >= mid).to(tl.int32), axis=0)
                up = cnt >= top_k
                lo = tl.where(up, mid, lo)
                hi = tl.where(up, hi, mid - 1)
            thr = lo
        if TOP_P:  # the smallest key K >= thr with mass(key > K, kept) < top_p * kept mass
            total = 0.0
            for start in range(0, V, BLOCK):
                x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp,
                                   PENALTY=PENALTY, GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
                e = tl.where(_key(x) >= thr, tl.exp(x - mx), 0.0)
                total += tl.sum(e, axis=0)
            goal = top_p * total
            lo = thr
            hi = _key(mx)
            for _ in range(32):
                mid = lo + (hi - lo) // 2
                above = 0.0
                for start in range(0, V, BLOCK):
                    x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp,
                                       PENALTY=PENALTY, GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
                    k = _key(x)
                    e = tl.where((k > mid) & (k >= thr), tl.exp(x - mx), 0.0)
                    above += tl.sum(e, axis=0)
                down = above < goal
                hi = tl.where(down, mid, hi)
                lo = tl.where(down, lo, mid + 1)
            thr = tl.maximum(thr, lo)
        if MIN_P:
            thr = tl.maximum(thr, _key(mx + log_min_p))
        # the draw: u from Philox at this row's counter
        r = tl.randint(seed, c)
        u = (r.to(tl.uint32, bitcast=True) >> 8).to(tl.float32) * 5.9604644775390625e-08
        total = 0.0
        for start in range(0, V, BLOCK):
            x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp, PENALTY=PENALTY,
                               GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
            total += tl.sum(tl.where(_key(x) >= thr, tl.exp(x - mx), 0.0), axis=0)
        target = u * total
        run = 0.0
        tok = 2147483647
        last = 0
        for start in range(0, V, BLOCK):
            x, i, ok = _load_x(row, seen_row, start, V, sl1, ss1, pen, temp, PENALTY=PENALTY,
                               GREEDY=GREEDY, BLOCK=BLOCK)  # fmt: skip
            kept = ok & (_key(x) >= thr)
            e = tl.where(kept, tl.exp(x - mx), 0.0)
            cum = tl.cumsum(e, axis=0) + run
            tok = tl.minimum(tok, tl.min(tl.where(kept & (cum > target), i, 2147483647), axis=0))
            last = tl.maximum(last, tl.max(tl.where(kept, i, 0), axis=0))
            run = tl.max(cum, axis=0)
        tok = tl.where(tok == 2147483647, last, tok)
    # A row without a finite logit draws token 0; the id always lies in [0, V).
    tok = tl.where(mx == float("-inf"), 0, tl.minimum(tl.maximum(tok, 0), V - 1))
    tl.store(CNT + b, c + 1)  # every call advances the stream, greedy ones included
    tl.store(OUT + b, tok)
    if MARK:
        tl.store(seen_row + tok.to(tl.int64) * ss1, 1)


@triton.jit
def _topk_chunks(
    L, SEEN, CAND, V, sl0, sl1, ss0, ss1, pen, temp, n_chunks,
    PENALTY: tl.constexpr, CHUNK: tl.constexpr, KC: tl.constexpr,
):  # fmt: skip
    """The first KC of a chunk's tokens by (value desc, index asc), packed as key << 32 |
    (2^32 - 1 - index) (one int64 whose order is that order); past V: the smallest int64."""
    b = tl.program_id(0)
    ch = tl.program_id(1)
    row = L + b.to(tl.int64) * sl0
    seen_row = SEEN + b.to(tl.int64) * ss0
    x, i, ok = _load_x(row, seen_row, ch * CHUNK, V, sl1, ss1, pen, temp, PENALTY=PENALTY,
                       GREEDY=False, BLOCK=CHUNK)  # fmt: skip
    packed = (_key(x) << 32) | (4294967295 - i.to(tl.int64))
    packed = tl.where(ok, packed, -9223372036854775807 - 1)
    top = tl.topk(packed, KC)
    base = (b.to(tl.int64) * n_chunks + ch) * KC
    tl.store(CAND + base + tl.arange(0, KC), top)


@triton.jit
def _topk_draw(
    CAND, L, SEEN, CNT, OUT, V, n_chunks, n_cand, sl0, sl1, ss0, ss1, seed, temp, pen, top_k,
    top_p, log_min_p, PENALTY: tl.constexpr, MARK: tl.constexpr, TOP_P: tl.constexpr,
    MIN_P: tl.constexpr, NC: tl.constexpr, KC: tl.constexpr, NCH: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    j = tl.arange(0, NC)
    packed = tl.load(CAND + b.to(tl.int64) * n_cand + j, mask=j < n_cand,
                     other=-9223372036854775807 - 1)  # fmt: skip
    s = tl.sort(packed, descending=True)
    key = s >> 32
    idx = (4294967295 - (s & 4294967295)).to(tl.int32)
    kth = tl.sum(tl.where(j == top_k - 1, key, 0), axis=0)
    # A chunk whose KC-th candidate still ties the k-th value may hold more such tokens than it
    # kept: this program then draws by the bisection plan, which sees every token.
    ch = tl.arange(0, NCH)
    last_of = tl.load(CAND + b.to(tl.int64) * n_cand + ch * KC + KC - 1, mask=ch < n_chunks,
                      other=-9223372036854775807 - 1)  # fmt: skip
    over = tl.max(((last_of >> 32) >= kth).to(tl.int32), axis=0) > 0
    kept = (j < n_cand) & (key >= kth) & (idx >= 0) & (idx < V)
    bits = tl.where(key >= 0, key, key ^ 0x7FFFFFFF).to(tl.int32)
    x = bits.to(tl.float32, bitcast=True)
    mx = tl.max(tl.where(j == 0, x, float("-inf")), axis=0)
    e = tl.where(kept, tl.exp(x - mx), 0.0)
    if TOP_P:  # keep, in this order, while the mass before a token is below top_p
        cum = tl.cumsum(e, axis=0)
        kept = kept & (cum - e < top_p * tl.sum(e, axis=0))
    if MIN_P:
        kept = kept & (x >= mx + log_min_p)
    e = tl.where(kept, e, 0.0)
    c = tl.load(CNT + b)
    r = tl.randint(seed, c)
    u = (r.to(tl.uint32, bitcast=True) >> 8).to(tl.float32) * 5.9604644775390625e-08
    cum = tl.cumsum(e, axis=0)
    target = u * tl.sum(e, axis=0)
    first = tl.min(tl.where(kept & (cum > target), j, NC), axis=0)
    last = tl.max(tl.where(kept, j, 0), axis=0)
    pos = tl.where(first == NC, last, first)
    tok = tl.sum(tl.where(j == pos, idx, 0), axis=0)
    tok = tl.where(mx == float("-inf"), 0, tl.minimum(tl.maximum(tok, 0), V - 1))
    if over:
        _draw_row(
            L, SEEN, CNT, OUT, b, V, sl0, sl1, ss0, ss1, seed, temp, pen, top_k, top_p,
            log_min_p, PENALTY=PENALTY, MARK=MARK, GREEDY=False, TOP_K=True, TOP_P=TOP_P,
            MIN_P=MIN_P, BLOCK=BLOCK,
        )  # fmt: skip
    else:
        tl.store(CNT + b, c + 1)
        tl.store(OUT + b, tok)
        if MARK:
            tl.store(SEEN + b.to(tl.int64) * ss0 + tok.to(tl.int64) * ss1, 1)


def _bisection(
    logits: GPUArray, counter: GPUArray, seen: GPUArray | None, o: GPUArray, seed: int,
    temperature: float, top_k: int, top_p: float, min_p: float, penalty: float,
) -> None:  # fmt: skip
    """The bisection plan, one program a row."""
    b, v = logits.shape
    ss = tuple(seen.element_strides) if seen is not None else (0, 0)
    launch(
        _sample_kernel, (b,),
        logits, seen if seen is not None else o, counter, o, v, *logits.element_strides, *ss,
        int(seed) & 0xFFFFFFFFFFFFFFFF, float(temperature) or 1.0, float(penalty), int(top_k),
        float(top_p), math.log(min_p) if min_p > 0 else 0.0,
        PENALTY=seen is not None and penalty != 1.0, MARK=seen is not None,
        GREEDY=temperature == 0, TOP_K=0 < top_k < v, TOP_P=top_p < 1.0, MIN_P=min_p > 0.0,
        BLOCK=BLOCK, num_warps=NUM_WARPS,
    )  # fmt: skip


def _sorted(
    logits: GPUArray, counter: GPUArray, seen: GPUArray | None, o: GPUArray, seed: int,
    temperature: float, top_k: int, top_p: float, min_p: float, penalty: float,
) -> None:  # fmt: skip
    """The sorted-candidates plan (0 < top_k <= FAST_TOP_K < V); a row whose chunks may have
    dropped ties is drawn by the bisection plan in the same program."""
    b, v = logits.shape
    kc = candidates(top_k)
    n_chunks = cdiv(v, CHUNK)
    cand = empty((b * n_chunks * kc,), "int64", logits.device)
    ss = tuple(seen.element_strides) if seen is not None else (0, 0)
    sl = tuple(logits.element_strides)
    penalized = seen is not None and penalty != 1.0
    launch(
        _topk_chunks, (b, n_chunks),
        logits, seen if seen is not None else o, cand, v, *sl, *ss, float(penalty),
        float(temperature), n_chunks, PENALTY=penalized, CHUNK=CHUNK, KC=kc, num_warps=8,
    )  # fmt: skip
    n_cand = n_chunks * kc
    launch(
        _topk_draw, (b,),
        cand, logits, seen if seen is not None else o, counter, o, v, n_chunks, n_cand, *sl, *ss,
        int(seed) & 0xFFFFFFFFFFFFFFFF, float(temperature), float(penalty), int(top_k),
        float(top_p), math.log(min_p) if min_p > 0 else 0.0,
        PENALTY=penalized, MARK=seen is not None, TOP_P=top_p < 1.0, MIN_P=min_p > 0.0,
        NC=next_pow2(n_cand), KC=kc, NCH=next_pow2(n_chunks), BLOCK=BLOCK, num_warps=8,
    )  # fmt: skip


def sample(
    logits: GPUArray,
    counter: GPUArray,
    seen: GPUArray | None = None,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
    out: GPUArray | None = None,
) -> GPUArray:
    """int32 [B]: one token per row of logits [B, V] (counter [B] int64 advanced and seen [B, V]
    uint8 marked in place)."""
    b, v = logits.shape
    o = new_out(out, (b,), int32, logits)
    if b == 0:
        return o
    args = (seed, temperature, top_k, top_p, min_p, repetition_penalty)
    if sorted_plan(temperature, top_k, v):
        _sorted(logits, counter, seen, o, *args)
    else:
        _bisection(logits, counter, seen, o, *args)
    return o
