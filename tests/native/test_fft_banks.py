"""A model of the native FFT kernel (native/src/fft/fft_kernel.cuh), run on the CPU: its
Stockham passes with the twiddle table pygpukit/backends/native/fft.py builds, in float64,
against numpy.fft (the indexing and the table layout, not the fp32 arithmetic, which the GPU
tests check); and its shared-memory swizzle, whose accesses must not conflict on banks."""

from __future__ import annotations

import numpy as np
import pytest

from pygpukit.backends.native.fft import radices, twiddle_table


def swz(i: np.ndarray) -> np.ndarray:
    """fft_kernel.cuh's swz."""
    b = i >> 5
    return i ^ ((b & 7) | (((b >> 1) & 3) << 3))


def shape(log2n: int) -> tuple[int, int, int, int]:
    """(N, RMAX, T threads a row, rows a block) as fft_kernel.cuh's Shape."""
    n = 1 << log2n
    rmax = 8 if n >= 8 else n
    rmax = max(rmax, 1)
    t = n // rmax
    threads = max(t, 128)
    return n, rmax, t, threads // t


def model(z: np.ndarray, log2n: int, inverse: bool, table: np.ndarray) -> np.ndarray:
    """The kernel's transform of one row: thread tid's values v[tid, g R + t], the passes'
    reads j + t N / R, twiddles table[off + (t - 1) Ns + k] and writes (j / Ns) Ns R + k + t Ns
    through a shared array, the last pass's outputs at j + t N / RL."""
    n, rmax, nt, _ = shape(log2n)
    v = np.stack([z[tid + np.arange(rmax) * nt] for tid in range(nt)])
    s = np.zeros(n, np.complex128)
    ns, off = 1, 0
    rs = radices(log2n)
    for p, r in enumerate(rs):
        if p > 0:
            idx = [[tid + g * nt + t * (n // r) for g in range(rmax // r) for t in range(r)]
                   for tid in range(nt)]  # fmt: skip
            v = s[np.array(idx)]
        for tid in range(nt):
            for g in range(rmax // r):
                u = v[tid, g * r : (g + 1) * r].copy()
                if ns > 1:
                    k = (tid + g * nt) & (ns - 1)
                    w = table[off + np.arange(r - 1) * ns + k]
                    u[1:] *= np.conj(w) if inverse else w
                kk = np.arange(r)
                f = np.exp((2j if inverse else -2j) * np.pi * np.outer(kk, kk) / r)
                v[tid, g * r : (g + 1) * r] = f @ u
        if p + 1 < len(rs):
            for tid in range(nt):
                for g in range(rmax // r):
                    j = tid + g * nt
                    base = (j & ~(ns - 1)) * r + (j & (ns - 1))
                    s[base + np.arange(r) * ns] = v[tid, g * r : (g + 1) * r]
        if ns > 1:
            off += ns * (r - 1)
        ns *= r
    rl = rs[-1] if rs else 1
    out = np.zeros(n, np.complex128)
    for tid in range(nt):
        for g in range(rmax // rl):
            out[tid + g * nt + np.arange(rl) * (n // rl)] = v[tid, g * rl : (g + 1) * rl]
    return out


@pytest.mark.parametrize("log2n", range(13))
def test_model_matches_numpy(log2n: int) -> None:
    n = 1 << log2n
    rng = np.random.default_rng(log2n)
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    for untangle in (False, True):
        table = twiddle_table(radices(log2n), untangle)
        assert table.size >= 1
        np.testing.assert_allclose(model(z, log2n, False, table), np.fft.fft(z), atol=1e-9 * n)
        np.testing.assert_allclose(model(z, log2n, True, table), np.fft.ifft(z) * n,
                                   atol=1e-9 * n)  # fmt: skip
    if n >= 2:  # the untangling twiddles follow the passes' (real pairs: X from Z)
        x = rng.standard_normal(2 * n)
        table = twiddle_table(radices(log2n), True)
        zz = model(x[0::2] + 1j * x[1::2], log2n, False, table)
        w = table[-(n + 1) :]
        k = np.arange(n + 1)
        za, zb = zz[k % n], np.conj(zz[(n - k) % n])
        got = (za + zb) / 2 + w * (za - zb) / 2 * -1j
        np.testing.assert_allclose(got, np.fft.rfft(x), atol=1e-9 * n)


def _conflicts(addrs: np.ndarray) -> int:
    """Wavefronts beyond the first that one warp's 4-byte accesses need (distinct words on one
    bank serialize; the same word is a broadcast)."""
    banks: dict[int, set[int]] = {}
    for a in addrs.tolist():
        banks.setdefault(a % 32, set()).add(a)
    return max(len(w) for w in banks.values()) - 1


@pytest.mark.parametrize("log2n", range(6, 13))
def test_swizzle_is_conflict_free(log2n: int) -> None:
    """Every warp's shared reads and writes of every pass hit 32 distinct banks for N >= 64
    (16 and 32 points conflict 2-way in their second pass); the untangling's reads of Z[k] do
    too, and those of Z[N - k] at most 2-way (the run that wraps past index 0)."""
    n, rmax, nt, rows = shape(log2n)
    rs = radices(log2n)
    lanes = np.arange(32)
    worst = wrap = 0
    for w0 in range(0, nt * rows, 32):
        thread = w0 + lanes
        rb, tid = (thread // nt) * n, thread % nt
        ns = 1
        for p, r in enumerate(rs):
            for g in range(rmax // r):
                j = tid + g * nt
                for t in range(r):
                    if p > 0:  # reads
                        worst = max(worst, _conflicts(swz(rb + j + t * (n // r))))
                    base = rb + (j & ~(ns - 1)) * r + (j & (ns - 1))
                    worst = max(worst, _conflicts(swz(base + t * ns)))  # writes
            ns *= r
        for g in range(n // nt + 1):  # untangling reads Z[k] and Z[N - k]
            k = tid + g * nt
            worst = max(worst, _conflicts(swz(rb + (k & (n - 1)))))
            wrap = max(wrap, _conflicts(swz(rb + ((n - k) & (n - 1)))))
    assert worst == 0, (n, worst)
    assert wrap <= 1, (n, wrap)
