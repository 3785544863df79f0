"""Plans of the Triton FFT (fft.py): how a length is split into passes, and the constant tables
each pass reads, computed once per (length, device) in float64 on the host and kept on the
device in fp32 (float64 for the float64 transforms, which run the passes and Bluestein only).

- ``radices(n)``: the pass radices r_1 ... r_k (product n, each <= RMAX) of the Stockham
  transform, or None when n has a prime factor above RMAX (then Bluestein). Each pass applies a
  dense r x r DFT matrix with tl.dot, padded to RP = max(16, next_pow2(r)) (tl.dot's smallest
  tile), so a pass costs about RP complex multiply-adds per point plus one read and one write of
  the whole signal. The split minimises the sum over passes of RP + PASS_COST (PASS_COST: the
  memory traffic of a pass, 16 bytes a point, in multiply-add equivalents at an H100's ratio of
  fp32 rate to bandwidth, about 18 flops a byte = 36 complex multiply-adds): 400 -> 25 x 16,
  512 -> 32 x 16, 1000 -> 10 x 10 x 10, 2048 -> 16 x 16 x 8, 4096 -> 16 x 16 x 16. PASS_COST is
  that estimate, not yet a measurement: benchmarks/fft.py is where to tune it.
- ``Plan``: for every pass its DFT matrix F (real and imaginary planes, [RP, RP], zero-padded)
  and, when the pass has later passes (M > 1), its twiddles T[k, m] = w_(r M)^(k m), [r, M]
  interleaved. The inverse transform uses the same tables conjugated in the kernel.
- ``Chirp``: Bluestein's tables for a length n and direction: the chirp c[j] = exp(-+ i pi j^2
  / n) (j^2 reduced mod 2n in exact integers before the angle, so the phase is exact for any n)
  and the FFT of the convolution kernel, Bhat = FFT_M(b) / M with b[j] = conj(c[|j|]) on the
  circle of M = next_pow2(2n - 1) points (1/M folds the inverse transform's scale in).

- ``fused_split``: the factors (N1, N2) of the one-kernel transform of fft_fused.py (n = N1 N2,
  both <= RMAX; N2 = 1 for one product), chosen by the multiply-adds of its two products, which
  depend on the padding and on what the call reads and writes (see fft_fused.py); ``Fused``:
  its tables, the DFT matrices of N1 and N2 and the twiddles W[j2, k1] = w_n^(j2 k1), [2, N2P,
  N1P] planes, zero-padded.

Building a plan uploads its tables and waits for that copy (the cached tables are then safe to
read from any stream): the first call of a length is not capturable in a CUDA graph, later
calls are.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends._support.fft import chirp_tables as _chirp_tables
from pygpukit.backends._support.fft import device_f32 as _device_f32
from pygpukit.backends._support.fft import interleaved as _interleaved
from pygpukit.backends._support.fft import uploaded as _uploaded

__all__ = [
    "RMAX",
    "Chirp",
    "Fused",
    "Pass",
    "Plan",
    "chirp",
    "fused",
    "fused_split",
    "next_pow2",
    "out_cols",
    "padded",
    "plan",
    "radices",
    "real_pairs",
    "untangle",
]

# Largest radix a pass applies as a dense DFT matrix: 64 x 64 fp32 matrices and a [64, 32] tile
# of the signal fit a program's registers; larger prime factors go to Bluestein.
RMAX = 64
PASS_COST = 36


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def padded(r: int) -> int:
    """The tile size a radix-r pass computes on (tl.dot needs dims >= 16, powers of two)."""
    return max(16, next_pow2(r))


@functools.lru_cache(maxsize=4096)
def _best(n: int) -> tuple[int, tuple[int, ...]] | None:
    """(cost, radices) of the cheapest split of n into radices <= RMAX, or None."""
    if n == 1:
        return 0, ()
    best: tuple[int, tuple[int, ...]] | None = None
    for r in range(min(n, RMAX), 1, -1):
        if n % r:
            continue
        sub = _best(n // r)
        if sub is None:
            continue
        cost = padded(r) + PASS_COST + sub[0]
        if best is None or cost < best[0]:
            best = cost, (r, *sub[1])
    return best


def radices(n: int) -> tuple[int, ...] | None:
    """The pass radices of a length-n transform (n = 1: one pass of radix 1), or None when n has
    a prime factor above RMAX."""
    if n == 1:
        return (1,)
    got = _best(n)
    return None if got is None else got[1]


@dataclass(frozen=True)
class Pass:
    """One Stockham pass: radix r (padded to rp), L = product of the earlier radices, M = that
    of the later ones; f: the [2, rp, rp] DFT matrix, t: the [r, M] twiddles (None when M = 1)."""

    r: int
    rp: int
    L: int
    M: int
    f: GPUArray
    t: GPUArray | None


@dataclass(frozen=True)
class Plan:
    n: int
    passes: tuple[Pass, ...]
    f64: bool = False  # float64 tables (the passes then run in float64)


@dataclass(frozen=True)
class Chirp:
    """Bluestein's tables of length n in one direction: c (n complex) and bhat (m complex)."""

    n: int
    m: int
    c: GPUArray
    bhat: GPUArray


_lock = threading.Lock()
_mats: dict[tuple[int, Any, bool], GPUArray] = {}
_plans: dict[tuple[int, Any, bool], Plan] = {}
_chirps: dict[tuple[int, bool, Any, bool], Chirp] = {}


def _table_dtype(f64: bool) -> Any:
    return np.float64 if f64 else np.float32


def _dft_matrix(r: int, dev: Any, f64: bool = False) -> GPUArray:
    key = (r, dev, f64)
    got = _mats.get(key)
    if got is None:
        rp = padded(r)
        k = np.arange(r)
        # (k j) mod r in integers: the angle is then exact to float64 rounding for any r.
        w = np.exp(-2j * np.pi * (np.outer(k, k) % r) / r)
        f = np.zeros((2, rp, rp), np.float64)
        f[0, :r, :r], f[1, :r, :r] = w.real, w.imag
        got = _mats[key] = _device_f32(f, dev, _table_dtype(f64))
    return got


def _twiddles(r: int, m: int, dev: Any, f64: bool) -> GPUArray:
    k = np.arange(r)[:, None]
    j = np.arange(m)[None, :]
    w = np.exp(-2j * np.pi * ((k * j) % (r * m)) / (r * m))
    return _device_f32(_interleaved(w, np.float64), dev, _table_dtype(f64))


def plan(n: int, dev: Any, f64: bool = False) -> Plan:
    """The (cached) plan of a length-n mixed-radix transform on ``dev`` (float64 tables when
    ``f64``); n must have radices."""
    key = (n, dev, f64)
    got = _plans.get(key)
    if got is not None:
        return got
    rs = radices(n)
    if rs is None:
        raise ValueError(f"fft plan: length {n} has a prime factor above {RMAX} (use Bluestein)")
    with _lock:
        passes = []
        done = 1
        for r in rs:
            rest = n // (done * r)
            t = _twiddles(r, rest, dev, f64) if rest > 1 else None
            passes.append(Pass(r, padded(r), done, rest, _dft_matrix(r, dev, f64), t))
            done *= r
        _uploaded(dev)
        got = _plans[key] = Plan(n, tuple(passes), f64)
    return got


def chirp(n: int, inverse: bool, dev: Any, f64: bool = False) -> Chirp:
    """The (cached) Bluestein tables of length n, direction ``inverse``, on ``dev`` (float64
    when ``f64``)."""
    key = (n, inverse, dev, f64)
    got = _chirps.get(key)
    if got is not None:
        return got
    m, c, bhat = _chirp_tables(n, inverse)
    dt = _table_dtype(f64)
    c_dev = _device_f32(_interleaved(c, dt), dev, dt)
    got = Chirp(n, m, c_dev, _device_f32(_interleaved(bhat, dt), dev, dt))
    _uploaded(dev)
    with _lock:
        _chirps[key] = got
    return got


@dataclass(frozen=True)
class Fused:
    """The tables of a fused length n = n1 n2: f1, f2 the [2, p, p] DFT matrices of n1 and n2
    (f2 is f1 when n2 = 1), tw the [2, n2p, n1p] twiddles (f1 when n2 = 1)."""

    n: int
    n1: int
    n2: int
    f1: GPUArray
    f2: GPUArray
    tw: GPUArray


_fused: dict[tuple[int, int, Any], Fused] = {}


def _pad2(r: int) -> int:
    return 1 if r == 1 else padded(r)


def out_cols(n: int, n1: int, n2: int, n_out: int, nyquist_ok: bool) -> tuple[int, bool]:
    """(C, nyquist): the output columns k2 < C the last product computes for outputs k < n_out
    (k = k1 + n1 k2; with n2 = 1 the columns are k1), and whether the Nyquist term X[n / 2] is
    summed apart. An rfft of even n needs k <= n / 2; its last column k2 = n2 / 2 (n2 even)
    holds only that term, and a separate sum (-1)^j x[j] is cheaper than a padded column
    block twice as wide (n2 = 32: 16 columns instead of 32)."""
    cols = (n_out - 1) // n1 + 1 if n2 > 1 else n_out
    full = _pad2(n2) if n2 > 1 else padded(n1)
    c = min(full, padded(cols))
    even = n % 2 == 0 and n_out == n // 2 + 1
    last = n2 if n2 > 1 else n1
    if nyquist_ok and even and last % 2 == 0 and cols > 1 and padded(cols - 1) < c:
        return padded(cols - 1), True
    return c, False


@functools.lru_cache(maxsize=4096)
def _fused_best(
    n: int, real_in: bool, n_out: int, real_out: bool, nyquist_ok: bool
) -> tuple[int, int, int, int] | None:
    """(cost, largest padded factor, N1, N2) of fused_split's choice, or None."""
    best: tuple[int, int, int, int] | None = None
    for n1 in range(1, min(n, RMAX) + 1):
        if n % n1 or n // n1 > RMAX or (n1 == 1 and n > 1):
            continue
        n2 = n // n1
        p1, p2 = padded(n1), _pad2(n2)
        c, _ = out_cols(n, n1, n2, n_out, nyquist_ok)
        if n2 == 1:
            cost = (2 if real_in or real_out else 4) * p1 * c
        else:
            cost = (2 if real_in else 4) * p2 * p1 * p1 + (2 if real_out else 4) * p1 * p2 * c
        # Ties go to the smaller largest tile (a K = 64 product needs the most registers).
        if best is None or (cost, max(p1, p2)) < best[:2]:
            best = (cost, max(p1, p2), n1, n2)
    return best


def fused_split(
    n: int, real_in: bool, n_out: int, real_out: bool, nyquist_ok: bool
) -> tuple[int, int] | None:
    """(N1, N2) of the fused transform of length n, or None when n is not a product of two
    factors <= RMAX. Cost: the real multiply-adds of the two products per row, padded;
    the first is [N2P, N1P] x [N1P, N1P] (two real products for real input, else four), the
    second [N1P, N2P] x [N2P, C] (two when only the real part is stored, else four); with
    N2 = 1 the one product [1, N1P] x [N1P, C] (two real products for real input or output)."""
    best = _fused_best(n, real_in, n_out, real_out, nyquist_ok)
    return None if best is None else (best[2], best[3])


# The untangling step of an rfft through real pairs, in the multiply-add units of the products
# (per row: a read of two values and a few products a point): an estimate, not a measurement.
UNTANGLE_COST = 8


def real_pairs(n: int) -> bool:
    """Whether the fused rfft of even n runs as a complex n / 2-point transform of the pairs
    z[j] = x[2 j] + i x[2 j + 1] plus an untangling step (fft_real.untangle_rows): where the real
    transform pads a factor to 64 and the pairs cost fewer multiply-adds (fused_split's cost
    model), or where only n / 2 fits one launch. Measured on an H100 (96000 rows, 2026-11-27,
    benchmarks/fft.py --pairs 1 0): rfft 1000 1203 us against 8269, 2048 1528 against 9294,
    4096 5510 against 5744 (each at its best points); but 512 (16 x 32 real, 16 x 16 complex:
    fewer multiply-adds) 472 against 364, so a tile without a factor of 64 keeps the real
    transform."""
    if n % 2 or n < 4:
        return False
    half = _fused_best(n // 2, False, n // 2, False, False)
    whole = _fused_best(n, True, n // 2 + 1, False, True)
    if half is None or whole is None:
        return half is not None
    return whole[1] >= RMAX and half[0] + UNTANGLE_COST * n < whole[0]


@functools.lru_cache(maxsize=256)
def _untangle_angles(n: int) -> np.ndarray:
    k = np.arange(n // 2 + 1)
    return _interleaved(np.exp(-2j * np.pi * k / n))


_untangles: dict[tuple[int, Any], GPUArray] = {}


def untangle(n: int, dev: Any) -> GPUArray:
    """The (cached) twiddles w_n^k, k <= n // 2, interleaved fp32, of real_pairs' step."""
    key = (n, dev)
    got = _untangles.get(key)
    if got is None:
        with _lock:
            got = _untangles[key] = _device_f32(_untangle_angles(n), dev)
    return got


def fused(n: int, n1: int, dev: Any) -> Fused:
    """The (cached) tables of the fused transform n = n1 (n / n1) on ``dev``."""
    key = (n, n1, dev)
    got = _fused.get(key)
    if got is not None:
        return got
    n2 = n // n1
    with _lock:
        f1 = _dft_matrix(n1, dev)
        if n2 == 1:
            f2 = tw = f1
        else:
            f2 = _dft_matrix(n2, dev)
            j2 = np.arange(n2)[:, None]
            k1 = np.arange(n1)[None, :]
            w = np.exp(-2j * np.pi * ((j2 * k1) % n) / n)
            t = np.zeros((2, padded(n2), padded(n1)), np.float64)
            t[0, :n2, :n1], t[1, :n2, :n1] = w.real, w.imag
            tw = _device_f32(t, dev)
        _uploaded(dev)
        got = _fused[key] = Fused(n, n1, n2, f1, f2, tw)
    return got
