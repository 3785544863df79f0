"""Drawing the next token of each row from logits (NumPy reference of the device sampler).

One draw per row b, with the random number of a counter-based generator: Philox4x32-10 (Salmon
et al., SC 2011; the Random123 constants and round, which Triton's tl.randint implements) keyed
by ``seed`` at counter ``counter[b]``; its first 32-bit word, top 24 bits, scaled by 2^-24, is
the uniform u in [0, 1). The same (seed, counter) gives the same u on every backend, and the
counter advances by one per draw (in place), so a replayed CUDA graph draws fresh numbers.

The distribution is HF transformers' logits-processor chain (as pygpukit.models.sampling's host
sampler): the repetition penalty on tokens marked in ``seen`` (divide a positive logit, multiply
a negative one), division by the temperature, top-k (keep values >= the k-th largest), top-p
(keep, in descending order, tokens while the mass before them is below top_p), min-p (keep
probabilities >= min_p x the largest). temperature 0 is greedy: the first index of the largest
penalized logit. The chosen token is marked in ``seen`` when given. Two plans, chosen by the
settings alone (the same on every backend):
- 0 < top_k <= FAST_TOP_K (< V): tokens in descending order of value (ties: lower index first);
  keep the top_k and ties with the k-th; top-p keeps, in that order, tokens while the mass
  before them is below top_p (the host sampler's rule); min-p; the draw runs in that order.
  The device keeps candidates(top_k) tokens of each CHUNK-token chunk: a row where some chunk
  holds that many tokens at or above the k-th value takes the other plan.
- otherwise: each filter keeps the tokens at or above a threshold value (found on the device by
  bisection over the float32 order), and the draw runs in index order. At a top-p boundary that
  falls inside a group of equal values this plan keeps the whole group (the host sampler keeps
  part of it, in index order).
NaN logits count as -inf, -0.0 as +0.0; a row without a finite logit draws token 0.
The draw: the first kept token at which the running float32 sum of exp(x - max) exceeds u x the
kept total (the last kept token if rounding leaves none). Sums in a different order (the device
adds in trees) can move a token that sits exactly on a boundary; the distribution is the same.
"""

from __future__ import annotations

import numpy as np

from ._common import Array

__all__ = [
    "sample", "philox4x32", "philox_rounds", "uniform24", "sorted_plan", "candidates",
    "FAST_TOP_K", "CHUNK",
]  # fmt: skip

# The sorted plan's settings, shared with the Triton kernels (one definition).
FAST_TOP_K = 256  # the largest top_k it serves
CHUNK = 4096  # tokens a device program sorts


def sorted_plan(temperature: float, top_k: int, v: int) -> bool:
    """Whether a draw with these settings takes the sorted plan."""
    return temperature != 0 and 0 < top_k <= FAST_TOP_K and top_k < v


def candidates(top_k: int) -> int:
    """Candidates a chunk keeps in the sorted plan: a power of two above top_k."""
    return max(16, 1 << top_k.bit_length())


_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)


def philox4x32(counter: Array, seed: int, rounds: int = 10) -> tuple[Array, ...]:
    """Philox4x32-``rounds`` of the 64-bit counters (as words c0 = low, c1 = high, c2 = c3 = 0)
    under the 64-bit key ``seed`` (k0 = low, k1 = high): four uint32 arrays."""
    c = np.asarray(counter).astype(np.uint64)
    c0, c1 = (c & _LO).astype(np.uint32), (c >> np.uint64(32)).astype(np.uint32)
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    zero = np.zeros_like(c0)
    return philox_rounds((c0, c1, zero, zero.copy()), (s & 0xFFFFFFFF, s >> 32), rounds)


def philox_rounds(
    ctr: tuple[Array, Array, Array, Array], key: tuple[int, int], rounds: int = 10
) -> tuple[Array, ...]:
    """Random123's philox4x32_R on uint32 words (the round of Salmon et al. 2011)."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=np.uint32) for w in ctr)
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            p0 = _M0 * c0.astype(np.uint64)
            p1 = _M1 * c2.astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), (p0 & _LO).astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), (p1 & _LO).astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            k0, k1 = k0 + _W0, k1 + _W1
    return c0, c1, c2, c3


def uniform24(counter: Array, seed: int) -> Array:
    """The uniform float32 in [0, 1) of each counter: the top 24 bits of Philox's first word."""
    w = philox4x32(counter, seed)[0]
    return ((w >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)).astype(np.float32)


def _threshold_topp(x: Array, kept: Array, m: float, top_p: float) -> float:
    """The smallest kept value whose tokens strictly above it hold less than top_p of the kept
    mass (float32 sums in descending order of value)."""
    v = np.sort(x[kept])[::-1]
    e = np.exp((v - np.float32(m)).astype(np.float32))
    total = e.sum(dtype=np.float32)
    uniq, first = np.unique(-v, return_index=True)  # descending distinct values
    above = np.concatenate([[0.0], np.cumsum(e, dtype=np.float32)])[first]  # mass strictly above
    ok = above < np.float32(top_p) * total
    return float(-uniq[ok][-1])


def _threshold_draw(x: Array, top_k: int, top_p: float, min_p: float, u: float) -> int:
    """The bisection plan: each filter keeps the values at or above its threshold; the draw
    runs in index order."""
    m = float(x.max())
    kept = np.ones(x.size, bool)
    if 0 < top_k < x.size:
        kept &= x >= np.partition(x, -top_k)[-top_k]
    if top_p < 1.0:
        kept &= x >= _threshold_topp(x, kept, m, top_p)
    if min_p > 0.0:
        kept &= x >= np.float32(m) + np.float32(np.log(min_p))
    e = np.where(kept, np.exp((x - np.float32(m)).astype(np.float32)), np.float32(0))
    run = np.cumsum(e, dtype=np.float32)
    hit = np.flatnonzero(run > np.float32(u) * run[-1])
    return int(hit[0]) if hit.size else int(np.flatnonzero(kept)[-1])


def _sorted_draw(x: Array, top_k: int, top_p: float, min_p: float, u: float) -> int | None:
    """The sorted plan: top-k, top-p, min-p and the draw in (value desc, index asc) order; None
    when some CHUNK-token chunk holds candidates(top_k) or more tokens at or above the k-th value
    (the device's chunk candidates could have left some out: the bisection plan draws then)."""
    order = np.lexsort((np.arange(x.size), -x))
    xs = x[order]
    kth = xs[top_k - 1]
    hits = np.concatenate([x >= kth, np.zeros((-x.size) % CHUNK, bool)]).reshape(-1, CHUNK)
    if (hits.sum(axis=1) >= candidates(top_k)).any():
        return None
    kept = xs >= kth
    m = xs[0]
    e = np.where(kept, np.exp((xs - m).astype(np.float32)), np.float32(0)).astype(np.float32)
    if top_p < 1.0:
        kept &= (np.cumsum(e, dtype=np.float32) - e) < np.float32(top_p) * e.sum(dtype=np.float32)
    if min_p > 0.0:
        kept &= xs >= m + np.float32(np.log(min_p))
    e = np.where(kept, e, np.float32(0))
    run = np.cumsum(e, dtype=np.float32)
    hit = np.flatnonzero(kept & (run > np.float32(u) * e.sum(dtype=np.float32)))
    pos = int(hit[0]) if hit.size else int(np.flatnonzero(kept)[-1])
    return int(order[pos])


def sample(
    logits: Array,
    counter: Array,
    seen: Array | None = None,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
) -> Array:
    """int32 [B]: one token per row of logits [B, V]; advances counter [B] (int64) and marks the
    token in seen [B, V] (uint8) in place."""
    lg = np.asarray(logits)
    b, v = lg.shape
    out = np.zeros(b, np.int32)
    u = uniform24(counter, seed)
    for r in range(b):
        x = lg[r].astype(np.float32)
        if seen is not None and repetition_penalty != 1.0:
            mark = seen[r] != 0
            pen = np.float32(repetition_penalty)
            x = np.where(mark, np.where(x < 0, x * pen, x / pen), x).astype(np.float32)
        if temperature != 0:
            x = (x / np.float32(temperature)).astype(np.float32)
        x = np.where(np.isnan(x), np.float32(-np.inf), x + np.float32(0)).astype(np.float32)
        tok: int | None
        if not np.isfinite(x.max()):
            tok = 0
        elif temperature == 0:
            tok = int(np.argmax(x))
        else:
            tok = (
                _sorted_draw(x, top_k, top_p, min_p, u[r])
                if sorted_plan(temperature, top_k, v)
                else None
            )
            if tok is None:
                tok = _threshold_draw(x, top_k, top_p, min_p, u[r])
        out[r] = tok
        if seen is not None:
            seen[r, tok] = 1
    counter += 1
    return out
