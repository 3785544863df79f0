"""The native mixed-radix FFT (native/src/fft/fft_mixed.cu): lengths whose prime factors are 2, 3,
5 and 7 but not a power of two, and the other lengths by Bluestein's convolution.

On the CPU: the radices (mixed_radices) and a float64 model of the kernel's passes over the
twiddle table pygpukit/backends/native/fft.py builds, against numpy.fft at every such length up
to 4096 (the indexing, the table and the odd radices' DFT, not the fp32 arithmetic), Bluestein's
steps over its table; and the routing table's length constraint.

On the GPU: the public ops forced to native against numpy.fft in float64 at every such length
(fft/ifft to 4096, rfft/irfft to 8192, float64 to half those) and at Bluestein lengths, many
rows, the refusals of the routing table and of the kernel's entry (test_native_fft.py runs its
strided, half, window, frame, determinism and graph tests at these lengths too)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
import pygpukit.ops.fft as ops_fft
from pygpukit.backends.native.fft import MIXED_RADICES, mixed_radices, twiddle_table
from pygpukit.errors import RouteError
from pygpukit.routing.table import TABLE

DEV = "cuda:0"
_FFT_OPS = ("fft", "ifft", "rfft", "irfft", "rfft_windowed", "rfft_frames")
_NP = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def smooth(n: int) -> bool:
    for p in (2, 3, 5, 7):
        while n % p == 0:
            n //= p
    return n == 1


select = importlib.import_module("pygpukit.routing.select")  # the package exports a function
_KERNEL = Path(__file__).parents[2] / "native" / "src" / "fft" / "fft_kernel.cuh"
MIXED = [n for n in range(2, 4097) if smooth(n) and n & (n - 1)]


# ---------------------------------------------------------------- CPU: the plan and a model


def test_radices() -> None:
    assert mixed_radices(400) == [5, 5, 8, 2]
    assert mixed_radices(200) == [5, 5, 8]
    assert mixed_radices(1000) == [5, 5, 5, 8]
    assert mixed_radices(2187) == [3] * 7
    assert mixed_radices(4) == [4] and mixed_radices(2) == [2]
    assert mixed_radices(1) is None and mixed_radices(11) is None and mixed_radices(0) is None
    for n in MIXED:
        rs = mixed_radices(n)
        assert rs is not None and int(np.prod(rs)) == n
        slots = [MIXED_RADICES.index(r) for r in rs]
        assert slots == sorted(slots), (n, rs)
        assert rs.count(4) + rs.count(2) <= 1  # one short power-of-two pass at most
        assert len(rs) <= 12  # fft.h kMaxPasses


def odd_dft(u: np.ndarray, inverse: bool) -> np.ndarray:
    """fft_kernel.cuh's dft_odd: pair sums and differences (its cos/sin literals are checked
    in test_root_literals)."""
    r = u.shape[-1]
    h = (r - 1) // 2
    y = np.empty_like(u)
    s = [u[..., t] + u[..., r - t] for t in range(1, h + 1)]
    d = [u[..., t] - u[..., r - t] for t in range(1, h + 1)]
    y[..., 0] = u[..., 0] + sum(s)
    for k in range(1, h + 1):
        c = u[..., 0].copy()
        b = np.zeros_like(c)
        for t in range(1, h + 1):
            a = 2 * np.pi * ((t * k) % r) / r
            cs, sn = np.cos(a), np.sin(a)
            c = c + cs * s[t - 1]
            b = b + sn * d[t - 1]
        y[..., k] = c + 1j * b if inverse else c - 1j * b
        y[..., r - k] = c - 1j * b if inverse else c + 1j * b
    return y


def test_root_literals() -> None:
    """fft_kernel.cuh's root_cos / root_sin literals are cos and sin of 2 pi m / R."""
    src = open(_KERNEL).read()
    body = src[src.index("constexpr double root_cos") : src.index("// The R-point DFT of odd R")]
    found = [float(v) for v in re.findall(r"-?0\.\d{15,}", body)]
    want = [np.cos(2 * np.pi * m / r) for r, m in ((3, 1), (5, 1), (5, 2), (7, 1), (7, 2), (7, 3))]
    want = [w for w in want if abs(abs(w) - 0.5) > 1e-12]  # cos(2 pi / 3) is the literal -0.5
    want += [np.sin(2 * np.pi * m / r) for r, m in ((3, 1), (5, 1), (5, 2), (7, 1), (7, 2), (7, 3))]
    assert len(found) == len(want)
    np.testing.assert_allclose(sorted(found), sorted(want), rtol=0, atol=4e-16)  # np: 1-2 ulps


def model(z: np.ndarray, passes: list[int], inverse: bool, table: np.ndarray) -> np.ndarray:
    """The kernel's passes on rows z [rows, n]: butterfly j reads j + t n / R, multiplies by
    table[off + (t - 1) ns + j % ns], takes the R-point DFT and writes (j - k) R + k + t ns."""
    n = z.shape[-1]
    x = z.astype(np.complex128)
    ns, off = 1, 0
    for r in passes:
        m = n // r
        j = np.arange(m)
        k = j % ns
        u = np.stack([x[:, j + t * m] for t in range(r)], axis=-1)  # [rows, m, r]
        if ns > 1:
            w = np.stack([table[off + (t - 1) * ns + k] for t in range(1, r)], axis=-1)
            u[..., 1:] *= np.conj(w) if inverse else w
            off += ns * (r - 1)
        if r % 2:
            u = odd_dft(u, inverse)
        else:
            kk = np.arange(r)
            u = u @ np.exp((2j if inverse else -2j) * np.pi * np.outer(kk, kk) / r).T
        y = np.empty_like(x)
        for t in range(r):
            y[:, (j - k) * r + k + t * ns] = u[..., t]
        x = y
        ns *= r
    return x


def test_model_matches_numpy_at_every_length() -> None:
    rng = np.random.default_rng(7)
    for n in MIXED:
        rs = mixed_radices(n)
        assert rs is not None
        z = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
        table = twiddle_table(rs, False)
        np.testing.assert_allclose(model(z, rs, False, table), np.fft.fft(z), atol=1e-10 * n,
                                   err_msg=f"n={n}")  # fmt: skip
        np.testing.assert_allclose(model(z, rs, True, table), np.fft.ifft(z) * n,
                                   atol=1e-10 * n, err_msg=f"n={n} inverse")  # fmt: skip


def test_untangling_twiddles_follow_the_passes() -> None:
    """rfft of 2N real values through the N-point transform of pairs: the table's last N + 1
    entries untangle it (fft_kernel.cuh's untangle_x)."""
    rng = np.random.default_rng(8)
    for n in (3, 5, 7, 100, 200, 500, 1000):
        rs = mixed_radices(n)
        assert rs is not None
        x = rng.standard_normal(2 * n)
        table = twiddle_table(rs, True)
        zz = model((x[0::2] + 1j * x[1::2])[None], rs, False, table)[0]
        w = table[-(n + 1) :]
        k = np.arange(n + 1)
        za, zb = zz[k % n], np.conj(zz[(n - k) % n])
        got = (za + zb) / 2 + w * (za - zb) / 2 * -1j
        np.testing.assert_allclose(got, np.fft.rfft(x), atol=1e-10 * n, err_msg=f"n={n}")


@pytest.mark.parametrize("n", [2, 11, 97, 401, 1009, 2039])
@pytest.mark.parametrize("inverse", [False, True])
def test_bluestein_model(n: int, inverse: bool) -> None:
    """The kernel's Bluestein steps over its table (passes of M, then the chirp and bhat): z c,
    M-point forward passes, times bhat, inverse passes, times c."""
    m = 1 << (2 * n - 2).bit_length()
    rs = mixed_radices(m) if m > 1 else []
    assert rs is not None and int(np.prod(rs)) == m
    table = twiddle_table(rs, False, n, inverse)
    passes = table.size - n - m
    c, bhat = table[passes : passes + n], table[passes + n :]
    rng = np.random.default_rng(n)
    z = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
    a = np.zeros((2, m), np.complex128)
    a[:, :n] = z * c
    conv = model(model(a, rs, False, table) * bhat, rs, True, table)
    want = np.fft.ifft(z) * n if inverse else np.fft.fft(z)
    np.testing.assert_allclose(conv[:, :n] * c, want, atol=1e-10 * n, err_msg=f"n={n}")


def test_routing_constraint() -> None:
    """The table sends 7-smooth lengths and any up to half the top to native (even ones for the
    real ops), and names the constraint for the others."""
    assert select._smooth(400, (2, 3, 5, 7)) and select._smooth(1, (2,))
    assert not select._smooth(11, (2, 3, 5, 7)) and not select._smooth(0, (2,))
    assert TABLE["rfft"].candidates[0].smooth == ("n", 2, 8192, 2, (2, 3, 5, 7), 4096)
    assert TABLE["fft"].candidates[1].smooth == ("n", 1, 2048, 1, (2, 3, 5, 7), 1024)


def test_table_agrees_with_the_plan() -> None:
    """Every n the routing table sends to native, _plan accepts, and every other n it refuses,
    for each class of op (complex: fft; real through pairs: rfft, irfft) and precision."""
    from pygpukit.backends.native.fft import _plan

    cases = (("fft", np.complex64, 0, False), ("fft", np.complex128, 1, True),
             ("rfft", np.float32, 0, False), ("rfft", np.float64, 1, True),
             ("irfft", np.complex64, 0, False), ("irfft", np.complex128, 1, True))  # fmt: skip
    for op, dt, idx, f64 in cases:
        x = gp.from_numpy(np.ones((1, 8), dt))  # on the CPU: the GPU candidates fail for that
        for n in range(1, 8400 if op != "fft" else 4200):
            why = gp.routing.explain(op, x, n=n).candidates[idx][1]
            table = not any("prime factors in" in r for r in why)
            try:
                _plan(op, n, op != "fft", f64)
                planned = True
            except ValueError:
                planned = False
            assert table == planned, (op, dt, n, why)


def test_float_quotient_is_exact() -> None:
    """fft_mixed.cu's q = int((j + 1/2) * (1 / ns)) in float32 equals j / ns for every j, ns
    <= 4096."""
    j = np.arange(4096, dtype=np.float32)
    for ns in range(1, 4097):
        inv = np.float32(1.0) / np.float32(ns)
        q = ((j + np.float32(0.5)) * inv).astype(np.int32)
        assert np.array_equal(q, np.arange(4096) // ns), ns


def test_plan_refusals() -> None:
    """_plan names what it does not serve (the routing table keeps such calls off it)."""
    from pygpukit.backends.native.fft import _plan

    assert _plan("fft", 400, False).passes == (5, 5, 8, 2)
    assert _plan("fft", 401, False).bluestein and _plan("rfft", 802, True).points == 401
    assert _plan("fft", 512, False).log2n == 9
    for op, n, pairs, f64, msg in (
        ("rfft", 999, True, False, "even lengths"),
        ("fft", 4097, False, False, "1..4096"),
        ("fft", 2053, False, False, "prime factor above 7 up to 2048"),
        ("fft", 1031, False, True, "prime factor above 7 up to 1024"),
        ("rfft", 8194, True, False, "2..8192"),
    ):
        with pytest.raises(ValueError, match=msg):
            _plan(op, n, pairs, f64)


# ---------------------------------------------------------------- GPU: the kernel


def pairs(z: Any) -> np.ndarray:
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if z.dtype.kind == "c" else z


def up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device=DEV)


def complex_signal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (as64(rand(rng, shape, "float32")) + 1j * as64(rand(rng, shape, "float32"))).astype(
        np.complex64
    )


@pytest.fixture
def native() -> Any:
    with gp.route(",".join(f"{op}:native" for op in _FFT_OPS)):
        gp.routing.reset_stats()
        yield
        ran = {op: by for op, by in gp.routing.stats().items() if op in _FFT_OPS}
        assert all(set(by) <= {"native"} for by in ran.values()), ran


def _chunks(seq: list[int], k: int) -> list[list[int]]:
    return [seq[i::k] for i in range(k)]


def check_complex(n: int) -> None:
    """fft and ifft of n points, complex and real input, three norms, against numpy."""
    rng = np.random.default_rng(seed("nfft-mixed", n))
    x = complex_signal(rng, (3, n))
    for op, norm in (("fft", None), ("ifft", "ortho")):
        got = getattr(gp.fft, op)(up(x), norm=norm)
        want = _NP[op](x.astype(np.complex128), norm=norm)
        assert_close(pairs(got), pairs(want), "float32", name=f"{op} {n} {norm}")
    xr = rand(rng, (2, n), "float32")
    got = gp.fft.fft(up(xr), norm="forward")
    assert_close(pairs(got), pairs(np.fft.fft(as64(xr), norm="forward")), "float32",
                 name=f"fft real {n}")  # fmt: skip
    got = gp.fft.ifft(up(xr))
    assert_close(pairs(got), pairs(np.fft.ifft(as64(xr))), "float32", name=f"ifft real {n}")


def check_real(n: int) -> None:
    """rfft and irfft of even n values (n / 2 complex points) against numpy."""
    rng = np.random.default_rng(seed("nrfft-mixed", n))
    x = rand(rng, (3, n), "float32")
    got = gp.fft.rfft(up(x))
    assert_close(pairs(got), pairs(np.fft.rfft(as64(x))), "float32", name=f"rfft {n}")
    z = complex_signal(rng, (3, n // 2 + 1))  # DC and Nyquist imaginary parts ignored
    got = gp.fft.irfft(up(z), n=n, norm="ortho")
    want = np.fft.irfft(z.astype(np.complex128), n=n, norm="ortho")
    assert_close(got.to_numpy(), want, "float32", name=f"irfft {n}")


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("lengths", _chunks(MIXED, 4), ids=lambda v: f"from{v[0]}")
def test_complex_every_length(lengths: list[int]) -> None:
    """fft and ifft at every 7-smooth length <= 4096 that is not a power of two."""
    for n in lengths:
        check_complex(n)


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
@pytest.mark.parametrize("lengths", _chunks([2 * n for n in MIXED], 4), ids=lambda v: f"from{v[0]}")
def test_real_every_length(lengths: list[int]) -> None:
    """rfft and irfft at every even 7-smooth length <= 8192 that is not a power of two."""
    for n in lengths:
        check_real(n)


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
def test_float64() -> None:
    """complex128 and float64 to float64's bound at 7-smooth lengths to the float64 tops and at
    Bluestein lengths to theirs (11, 401, 1021 points)."""
    rng = np.random.default_rng(seed("nfft-mixed-64"))
    for n in (3, 5, 6, 7, 12, 100, 400, 1000, 1029, 2000, 2025, 1680, 11, 401, 1021):
        z = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
        for op in ("fft", "ifft"):
            got = getattr(gp.fft, op)(up(z), norm="ortho")
            assert got.dtype is gp.complex128
            assert_close(pairs(got), pairs(_NP[op](z, norm="ortho")), "float64",
                         name=f"{op} {n}")  # fmt: skip
    for n in (400, 401):
        xr = rng.standard_normal((2, n))
        assert_close(pairs(gp.fft.fft(up(xr))), pairs(np.fft.fft(xr)), "float64",
                     name=f"fft real {n}")  # fmt: skip
    for n_fft in (400, 802):
        sig, win = rng.standard_normal((2, 3000)), rng.standard_normal(n_fft)
        got = ops_fft.rfft_frames(up(sig), up(win), hop=160, pad=n_fft // 2, pad_mode="reflect",
                                  power=1.0)  # fmt: skip
        yp = np.pad(sig, ((0, 0), (n_fft // 2, n_fft // 2)), mode="reflect")
        idx = np.arange(got.shape[1])[:, None] * 160 + np.arange(n_fft)[None, :]
        want = np.abs(np.fft.rfft(yp[:, idx] * win, axis=-1))
        assert got.dtype is gp.float64
        assert_close(got.to_numpy(), want, "float64", name=f"frames {n_fft}")
    for n in (6, 400, 2000, 4000, 22, 802, 2042):
        x = rng.standard_normal((2, n))
        assert_close(pairs(gp.fft.rfft(up(x))), pairs(np.fft.rfft(x)), "float64",
                     name=f"rfft {n}")  # fmt: skip
        z = rng.standard_normal((2, n // 2 + 1)) + 1j * rng.standard_normal((2, n // 2 + 1))
        got = gp.fft.irfft(up(z), n=n)
        assert got.dtype is gp.float64
        assert_close(got.to_numpy(), np.fft.irfft(z, n=n), "float64", name=f"irfft {n}")


BLUESTEIN = [11, 13, 17, 22, 97, 101, 202, 401, 997, 1009, 1331, 2039, 2047]


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
def test_bluestein_lengths() -> None:
    """Lengths with a prime factor above 7 (Bluestein's convolution in the kernel): fft and
    ifft to 2048 points, rfft and irfft of twice those."""
    for n in BLUESTEIN:
        check_complex(n)
        check_real(2 * n)


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
def test_refusals_name_the_lengths() -> None:
    """Forced to native, lengths with another prime factor past Bluestein's top, odd real
    lengths and lengths past the tops are refused by name; the runtime stays usable."""
    cases = (("fft", 2053, np.float32), ("rfft", 999, np.float32), ("irfft", 6002, np.complex64),
             ("fft", 4200, np.float32), ("fft", 2100, np.complex128),
             ("fft", 1030, np.complex128), ("rfft", 4200, np.float64))  # fmt: skip
    for op, n, dt in cases:
        with pytest.raises(RouteError, match="prime factors in"):
            getattr(gp.fft, op)(up(np.ones((2, 10), dt)), n=n)
    got = gp.fft.fft(up(np.ones((1, 12), np.float32)))
    assert_close(pairs(got), pairs(np.fft.fft(np.ones((1, 12)))), "float32", name="after")


@pytest.mark.gpu
@pytest.mark.usefixtures("native")
def test_many_rows() -> None:
    """3000 rows: many blocks of several rows each, the last block's spare rows idle."""
    rng = np.random.default_rng(seed("nfft-mixed-rows"))
    for n in (400, 401):
        x = complex_signal(rng, (3001, n))
        assert_close(pairs(gp.fft.fft(up(x))), pairs(np.fft.fft(x.astype(np.complex128))),
                     "float32", name=f"fft {n}")  # fmt: skip
    xr = rand(rng, (2999, 802), "float32")
    assert_close(pairs(gp.fft.rfft(up(xr))), pairs(np.fft.rfft(as64(xr))), "float32",
                 name="rfft 802")  # fmt: skip


@pytest.mark.gpu
def test_kernel_entry_refuses_bad_plans() -> None:
    """fft_rows (native/src/fft/fft.cu) checks a plan before any launch: the radices' order,
    their product, Bluestein's M, the points' range; the runtime stays usable."""
    from pygpukit.backends.native._libs import extension

    x = up(np.ones((2, 400), np.complex64))
    y = gp.empty((2, 400), gp.complex64, DEV)
    tw = up(np.ones(4096, np.float32))

    def call(radices: list[int], points: int = 0, bluestein: bool = False) -> None:
        # fmt: off
        extension().fft_rows(
            0, 0, -1, False, False, 0, "float32", x.data_ptr(), 2, 1, 1, 800, 0, 0, 2, 400, 0,
            0, 0, 0, 0, y.data_ptr(), 800, 0, 0, 2, 400, 0, 1.0, tw.data_ptr(), radices, points,
            bluestein,
        )
        # fmt: on

    for radices, points, blue, msg in (
        ([8, 5, 5, 2], 0, False, "order 7, 5, 3, 8, 4, 2"),
        ([5, 5, 8], 400, False, "product 200 is not the points 400"),
        ([6, 5], 0, False, "radix 6"),
        ([8, 8, 8, 8, 2], 0, False, "2..4096 points"),
        ([8, 4], 401, True, "power of two in"),
        ([8, 8, 8, 2, 2], 2049, True, "2..2048 points"),
        ([2] * 13, 0, False, "at most 12 radices"),
    ):
        with pytest.raises(ValueError, match=msg):
            call(radices, points, blue)
    got = gp.fft.fft(x)
    assert_close(pairs(got), pairs(np.fft.fft(np.ones((2, 400)))), "float32", name="after")
