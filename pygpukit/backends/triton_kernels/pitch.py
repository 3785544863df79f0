"""pYIN's observation probabilities (pygpukit/ops/pitch.py's contract; the NumPy twin is
backends/cpu/pitch.py).

``_observe_kernel``: one program per frame, the frame's periods in one [BLOCK_P] tile. Troughs
come from three shifted loads; the threshold loop keeps, per threshold, the troughs below it,
their ranks (an inclusive cumsum over the tile) and count, and accumulates beta_j * the
Boltzmann prior in float64 (scipy's formula, as the twin). The candidates' bins follow
librosa's arithmetic in float64 (f0 = sr / period, 12 * bins_per_semitone * log2(f0 / fmin),
rounded half to even, clipped). NumPy's last-write-wins assignment is reproduced without
atomics: bins never rise along the candidates (see the op's docstring), so a candidate wins its
bin unless the next candidate has the same bin. The next candidate comes from a reversed
running minimum of candidate indices read one lane further on (tl.gather). The program writes
its whole row: zeros over the voiced half, a barrier (so the winners' stores land after them),
the winners, then (1 - voiced_prob) / n_pitch_bins over the unvoiced half.

float64 scalars (sr, fmin, the prior's parameters) are passed as bit patterns
(_common.scalar_bits): Triton would round a Python float argument to float32. log2 is
log(x) / log(2) in libdevice's float64 log (the interpreter has no log2 stand-in); the twin's
np.log2 may differ in the last bit, which moves a bin only for an f0 within ~1e-13 of a bin
edge.
"""

# Triton kernel and @triton.jit helper bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import math

import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from pygpukit.backends.triton_kernels._common import (
    GPUArray,
    next_pow2,
    scalar_bits,
    scalar_value,
)
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import float64

__all__ = ["pyin_observations"]

_BLOCK_B = 1024


@triton.jit
def _min_combine(a, b):
    return tl.minimum(a, b)


@triton.jit
def _round_half_even(v):
    fl = tl.floor(v)
    frac = v - fl  # exact: fl is v with its fraction cleared
    even = (fl * 0.5) == tl.floor(fl * 0.5)
    up = (frac > 0.5) | ((frac == 0.5) & (~even))
    return tl.where(up, fl + 1.0, fl)


@triton.jit
def _observe_kernel(
    YIN, SH, THR, BETA, OBS, VP,
    P, NT, NP, sy0, sy1, ss0, ss1, sthr, sbeta, so0, so1, svp, min_period, bins_per_octave,
    sr_hi, sr_lo, fmin_hi, fmin_lo, lam_hi, lam_lo, nt_hi, nt_lo, inv_ln2_hi, inv_ln2_lo,
    BLOCK_P: tl.constexpr, BLOCK_B: tl.constexpr,
):  # fmt: skip
    r = tl.program_id(0).to(tl.int64)
    sr = scalar_value(sr_hi, sr_lo, tl.float64)
    fmin = scalar_value(fmin_hi, fmin_lo, tl.float64)
    lam = scalar_value(lam_hi, lam_lo, tl.float64)
    no_trough = scalar_value(nt_hi, nt_lo, tl.float64)
    inv_ln2 = scalar_value(inv_ln2_hi, inv_ln2_lo, tl.float64)

    i = tl.arange(0, BLOCK_P)
    inb = i < P
    row = YIN + r * sy0
    x = tl.load(row + i * sy1, mask=inb, other=0.0)
    xl = tl.load(row + (i - 1) * sy1, mask=inb & (i > 0), other=0.0)
    xr = tl.load(row + (i + 1) * sy1, mask=(i + 1) < P, other=0.0)
    trough = tl.where(i == 0, x < xr, tl.where(i == P - 1, x < xl, (x < xl) & (x <= xr))) & inb
    h = x.to(tl.float64)

    # the deepest trough (first on ties) and the number of thresholds it is not below; it
    # gains the beta mass of that many leading thresholds (librosa's beta_probs[:n])
    h_min = tl.min(tl.where(trough, h, float("inf")), 0)
    deepest = tl.min(tl.where(trough & (h == h_min), i, BLOCK_P), 0)
    n_not_below = tl.full([], 0, tl.int32)
    for j in range(0, NT):
        n_not_below += tl.where(h_min < tl.load(THR + j * sthr), 0, 1)

    c0 = 1.0 - libdevice.exp(-lam)
    acc = tl.zeros([BLOCK_P], tl.float64)
    not_below_min = tl.zeros([BLOCK_P], tl.float64)  # every lane holds the same running sum
    for j in range(0, NT):
        t = tl.load(THR + j * sthr)
        beta = tl.load(BETA + j * sbeta)
        below = trough & (h < t)
        below_i = below.to(tl.int32)
        rank = tl.cumsum(below_i, 0) - 1
        n = tl.sum(below_i, 0).to(tl.float64)
        fact = c0 / (1.0 - libdevice.exp(-lam * n))
        prior = fact * libdevice.exp(-lam * rank.to(tl.float64))
        acc += tl.where(below, prior, 0.0) * beta
        not_below_min += tl.where(j < n_not_below, beta, 0.0)
    probs = tl.where(trough, acc, 0.0)
    probs = tl.where(i == deepest, probs + no_trough * not_below_min, probs)

    cand = trough & (probs != 0.0)
    shift = tl.load(SH + r * ss0 + i * ss1, mask=inb, other=0.0).to(tl.float64)
    period = (min_period + i).to(tl.float64) + shift
    f0 = sr / tl.where(cand, period, 1.0)
    v = bins_per_octave * (libdevice.log(f0 / fmin) * inv_ln2)
    v = tl.minimum(tl.maximum(_round_half_even(v), 0.0), NP * 1.0)
    bins = tl.where(cand, v, -1.0).to(tl.int32)

    # the next candidate after each lane: a reversed running minimum read one lane on
    nearest = tl.associative_scan(tl.where(cand, i, BLOCK_P), 0, _min_combine, reverse=True)
    on = tl.minimum(i + 1, BLOCK_P - 1)
    nxt = tl.where(i + 1 < BLOCK_P, tl.gather(nearest, on, 0), BLOCK_P)
    nxt_bin = tl.gather(bins, tl.minimum(nxt, BLOCK_P - 1), 0)
    win = cand & ((nxt >= BLOCK_P) | (nxt_bin != bins)) & (bins < NP)

    out = OBS + r * so0
    for b0 in range(0, NP, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        tl.store(out + b * so1, tl.zeros([BLOCK_B], tl.float64), mask=b < NP)
    tl.debug_barrier()
    tl.store(out + bins * so1, probs, mask=win)
    voiced = tl.sum(tl.where(win, probs, 0.0), 0)
    voiced = tl.minimum(tl.maximum(voiced, 0.0), 1.0)
    unvoiced = (1.0 - voiced) / NP
    for b0 in range(0, NP, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        tl.store(out + (NP + b) * so1, tl.zeros([BLOCK_B], tl.float64) + unvoiced, mask=b < NP)
    tl.store(VP + r * svp, voiced)


def pyin_observations(
    yin: GPUArray,
    shifts: GPUArray,
    thresholds: GPUArray,
    beta_probs: GPUArray,
    *,
    min_period: int,
    sr: float,
    fmin: float,
    n_pitch_bins: int,
    bins_per_semitone: int,
    boltzmann: float,
    no_trough_prob: float,
    out: None = None,
) -> tuple[GPUArray, GPUArray]:
    rows, p = yin.shape  # two results: the op takes no out= (the dispatcher passes None)
    dev = yin._device
    obs = empty((rows, 2 * n_pitch_bins), float64, dev)
    voiced = empty((rows,), float64, dev)
    if rows == 0:
        return obs, voiced
    block_p = max(16, next_pow2(p))
    bits = [
        *scalar_bits(sr, tl.float64),
        *scalar_bits(fmin, tl.float64),
        *scalar_bits(boltzmann, tl.float64),
        *scalar_bits(no_trough_prob, tl.float64),
        *scalar_bits(1.0 / math.log(2.0), tl.float64),
    ]
    launch(
        _observe_kernel, (rows,),
        yin, shifts, thresholds, beta_probs, obs, voiced,
        p, thresholds.shape[0], n_pitch_bins, *yin.element_strides, *shifts.element_strides,
        thresholds.element_strides[0], beta_probs.element_strides[0], *obs.element_strides,
        voiced.element_strides[0], min_period, 12 * bins_per_semitone,
        *bits,
        BLOCK_P=block_p, BLOCK_B=_BLOCK_B, num_warps=max(4, min(16, block_p // 256)),
    )  # fmt: skip
    return obs, voiced
