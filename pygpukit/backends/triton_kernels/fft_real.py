"""The real-signal pieces of the fused FFT (fft_fused.py): a frame's samples read from a
padded signal (sample, the STFT's centre padding), the untangling step of an rfft through
real pairs (untangle_rows), and |X| ** p taken as a value is stored (power_of). Their place in the
kernel is described in fft_fused.py's docstring.
"""

# Triton @triton.jit function bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl

from pygpukit.backends.triton_kernels._common import pad_index

__all__ = ["power_of", "sample", "untangle_rows"]


@triton.jit
def power_of(re, im, POWER: tl.constexpr):
    """|re + i im| ** POWER for POWER 1 or 2 in fp32 (the square root of the sum for 1, as
    audio._complex.magnitude computes it)."""
    p = re * re + im * im
    if POWER == 1:
        p = tl.sqrt_rn(p)
    return p


@triton.jit
def sample(X, xrow, fstart, q, ok, sxe, n_sig, PADMODE: tl.constexpr):
    """Real input value q of each row: x[row, q], or with PADMODE (a frame of a padded
    signal, fstart its first sample's position) the signal's sample fstart + q as np.pad's
    mode gives it (pad_index)."""
    if PADMODE == 0:
        xo = xrow[:, None, None] + q.to(tl.int64) * sxe
        return tl.load(X + xo, mask=ok, other=0.0).to(tl.float32)
    src, valid = pad_index(fstart[:, None, None] + q, n_sig, PADMODE)
    xo = xrow[:, None, None] + src * sxe
    return tl.load(X + xo, mask=ok & valid, other=0.0).to(tl.float32)


@triton.jit
def untangle_rows(Y, UT, yrow, rok, sye, n_out, scale, M: tl.constexpr, UB: tl.constexpr,
              ROWS: tl.constexpr, POWER: tl.constexpr):  # fmt: skip
    """rfft of n = 2 M real values from Z = FFT_M(z), z[j] = x[2 j] + i x[2 j + 1], already
    stored in Y[0, M): for each pair (k, M - k), k <= M // 2 (Z[M] is Z[0]), with A = Z[k],
    B = Z[M - k], E = (A + conj B) / 2 (the even samples' DFT), O = -i (A - conj B) / 2 (the odd
    samples') and P = w_n^k O (UT[k] = w_n^k): X[k] = E + P and X[M - k] = conj(E - P)
    (w_n^(M - k) = -conj(w_n^k)). A pair is read and written by the same lanes, so the
    in-place rewrite needs no barrier between chunks; the one before the first read makes
    every lane's stores of Z visible (CTA scope), and the reads skip L1 (.cg).

    With POWER (1 or 2) the result is |X| ** POWER, one fp32 value a term written at float
    offset k of the row (Y is then the complex row used as scratch, the caller's result a view
    of each row's first n_out floats). Those writes land on other lanes' pairs, so UB covers
    every pair in one chunk and a second barrier separates all reads from all writes."""
    tl.debug_barrier()
    for c in tl.range(0, M // 2 + 1, UB, num_stages=1):
        k = c + tl.arange(0, UB)
        kok = k <= M // 2
        ok = rok[:, None] & kok[None, :]
        km = tl.where(k == 0, 0, M - k)
        ao = yrow[:, None] + k.to(tl.int64)[None, :] * sye
        bo = yrow[:, None] + km.to(tl.int64)[None, :] * sye
        ar = tl.load(Y + ao, mask=ok, other=0.0, cache_modifier=".cg")
        ai = tl.load(Y + ao + 1, mask=ok, other=0.0, cache_modifier=".cg")
        br = tl.load(Y + bo, mask=ok, other=0.0, cache_modifier=".cg")
        bi = tl.load(Y + bo + 1, mask=ok, other=0.0, cache_modifier=".cg")
        er = 0.5 * (ar + br)
        ei = 0.5 * (ai - bi)
        o_r = 0.5 * (ai + bi)
        o_i = -0.5 * (ar - br)
        wr = tl.load(UT + 2 * k, mask=kok, other=0.0)[None, :]
        wi = tl.load(UT + 2 * k + 1, mask=kok, other=0.0)[None, :]
        pr = wr * o_r - wi * o_i
        pi = wr * o_i + wi * o_r
        okk = ok & (k < n_out)[None, :]
        okm = ok & (M - k < n_out)[None, :]
        if POWER != 0:
            tl.debug_barrier()  # every pair read before the first float lands
            ko = yrow[:, None] + k.to(tl.int64)[None, :]
            mo = yrow[:, None] + (M - k).to(tl.int64)[None, :]
            tl.store(Y + ko, power_of((er + pr) * scale, (ei + pi) * scale, POWER), mask=okk)
            tl.store(Y + mo, power_of((er - pr) * scale, (pi - ei) * scale, POWER), mask=okm)
        else:
            tl.store(Y + ao, (er + pr) * scale, mask=okk)
            tl.store(Y + ao + 1, (ei + pi) * scale, mask=okk)
            mo = yrow[:, None] + (M - k).to(tl.int64)[None, :] * sye
            tl.store(Y + mo, (er - pr) * scale, mask=okm)
            tl.store(Y + mo + 1, (pi - ei) * scale, mask=okm)
