"""Triton fft/ifft/rfft/irfft (fused one-kernel path, Stockham passes, Bluestein) against
float64 numpy.fft.

Under the interpreter: one length per code path (one product or two in the fused kernel; one
pass, two and three passes with the fused path off; radices that pad; Bluestein for primes
above 64, its inner transform fused or in passes), batches of rows that leave the last program
ragged, strided inputs and outs, every norm, both tl.dot precisions, n padding and truncation,
and the routed op. On a GPU (marked gpu) also every length 1..4097.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS, GPU, LAYOUTS, poisoned, up, view

import pygpukit as gp
from pygpukit.backends.triton_kernels import fft as tfft
from pygpukit.backends.triton_kernels import fft_fused as tff
from pygpukit.backends.triton_kernels.fft_plan import RMAX, fused_split, out_cols, radices

# 1, 2, 3, 7, 16, 17, 61: one pass (a dense DFT of that size); 400 = 16 x 25, 512 = 16 x 32:
# two passes; 1000 and 2048: three; 97, 4097 = 17 x 241: Bluestein (prime factor above 64).
LENGTHS = [1, 2, 3, 7, 16, 17, 61, 97, 400, 512, 1000, 2048, 4097]
OPS = ["fft", "ifft", "rfft", "irfft"]
_NP = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def pairs(z: Any) -> np.ndarray:
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if z.dtype.kind == "c" else z


def signal(rng: np.random.Generator, shape: tuple[int, ...], op: str, dtype: str = "float32"):
    """Real input for fft/rfft, complex64 for ifft/irfft."""
    re = rand(rng, shape, dtype)
    if op in ("fft", "rfft"):
        return re
    return (as64(re) + 1j * as64(rand(rng, shape, "float32"))).astype(np.complex64)


def expected(op: str, x: np.ndarray, **kw: Any) -> np.ndarray:
    x64 = x.astype(np.complex128) if x.dtype.kind == "c" else as64(x)
    return _NP[op](x64, **kw)


def run(op: str, x: gp.GPUArray, n: int, norm: str = "backward", out: Any = None):
    return getattr(tfft, op)(x, n=n, norm=norm, out=out)


def in_len(op: str, n: int) -> int:
    return n // 2 + 1 if op == "irfft" else n


@pytest.fixture(params=["fused", "passes"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the fused kernel on (where the length allows) or off (Stockham passes only)."""
    monkeypatch.setattr(tff, "FUSED", request.param == "fused")
    return str(request.param)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_lengths(device: str, op: str, n: int, path: str) -> None:
    rng = np.random.default_rng(seed("tfft", op, n))
    x = signal(rng, (3, in_len(op, n)), op)
    out = poisoned((3, n // 2 + 1 if op == "rfft" else n), tfft_dtype(op), device)
    assert run(op, up(x, device), n, out=out) is out
    assert_close(pairs(out), pairs(expected(op, x, n=n)), "float32", name=f"{op} n={n}")


def tfft_dtype(op: str) -> gp.DataType:
    return gp.float32 if op == "irfft" else gp.complex64


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [12, 97])
def test_norms(device: str, op: str, norm: str, n: int) -> None:
    rng = np.random.default_rng(seed("tfft-norm", op, norm, n))
    x = signal(rng, (2, in_len(op, n)), op)
    r = run(op, up(x, device), n, norm)
    assert_close(pairs(r), pairs(expected(op, x, n=n, norm=norm)), "float32")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [5, 64, 80, 131])  # truncate, pad; 131: a padded Bluestein input
def test_n_pads_and_truncates(device: str, op: str, n: int) -> None:
    rng = np.random.default_rng(seed("tfft-n", op, n))
    x = signal(rng, (2, 70), op)
    r = run(op, up(x, device), n)
    assert_close(pairs(r), pairs(expected(op, x, n=n)), "float32")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [48, 400, 67])
def test_batched_strided_inputs_and_outs(device: str, op: str, layout: str, n: int) -> None:
    rng = np.random.default_rng(seed("tfft-lay", op, layout, n))
    x = signal(rng, (2, 3, in_len(op, n)), op)
    want = expected(op, x, n=n)
    out_shape = want.shape
    wide = poisoned((*out_shape[:-1], 2 * out_shape[-1]), tfft_dtype(op), device)
    out = wide[..., ::2]
    assert run(op, view(x, layout, device), n, out=out) is out
    assert_close(pairs(out), pairs(want), "float32")
    assert np.isnan(pairs(wide[..., 1::2])).all()


def test_four_lead_dims_and_broadcast_rows(device: str) -> None:
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 2, 3, 2, 40), "float32")
    xs = up(np.swapaxes(x, 0, 3), device).swapaxes(0, 3)  # lead dims that do not merge
    assert_close(pairs(run("rfft", xs, 40)), pairs(expected("rfft", x)), "float32")
    row = rand(rng, (1, 40), "float32")
    b = up(row, device).broadcast_to((3, 40))  # row stride 0
    assert_close(pairs(run("fft", b, 40)), pairs(np.fft.fft(np.repeat(as64(row), 3, 0))), "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_half_inputs(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("tfft-dt", dtype))
    x = rand(rng, (4, 400), dtype)
    assert_close(pairs(run("rfft", up(x, device), 400)), pairs(expected("rfft", x)), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_routed_ops_and_round_trip(device: str, dtype: str) -> None:
    """The public ops routed to Triton, in fp32 and in float64 (complex128 / float64 results)."""
    rng = np.random.default_rng(9)
    x = rand(rng, (3, 5, 16), dtype)
    xd = up(x, device)
    with gp.route(fft="triton", ifft="triton", rfft="triton", irfft="triton"):
        gp.routing.reset_stats()
        r = gp.fft.rfft(xd, n=20, axis=1)
        back = gp.fft.irfft(gp.fft.rfft(xd), n=16)
        z = gp.fft.ifft(gp.fft.fft(xd, norm="ortho"), norm="ortho")
        stats = gp.routing.stats()
    assert stats["rfft"] == {"triton": 2} and stats["irfft"] == {"triton": 1}
    assert r.dtype is (gp.complex128 if dtype == "float64" else gp.complex64)
    assert back.dtype is gp.as_dtype(dtype)
    assert_close(pairs(r), pairs(expected("rfft", x, n=20, axis=1)), dtype)
    assert_close(back, as64(x), dtype)
    assert_close(pairs(z), pairs(as64(x).astype(np.complex128)), dtype)


@pytest.mark.parametrize("n", [1 << 16, 100003])  # four passes; Bluestein on 2**18 points
def test_long_1d(device: str, n: int) -> None:
    rng = np.random.default_rng(seed("tfft-long", n))
    x = signal(rng, (n,), "ifft")
    assert_close(pairs(run("fft", up(x, device), n)), pairs(expected("fft", x)), "float32")


def test_empty_batch(device: str) -> None:
    r = run("rfft", up(np.zeros((0, 8), np.float32), device), 8)
    assert r.shape == (0, 5) and r.dtype is gp.complex64


def test_irfft_ignores_dc_and_nyquist_imaginary_parts(device: str) -> None:
    rng = np.random.default_rng(4)
    for n in (16, 17, 194):  # even, odd, and an even Bluestein length (97 x 2)
        h = np.fft.rfft(as64(rand(rng, (2, n), "float32"))).astype(np.complex64)
        h[:, 0] += 5j
        h[:, -1] -= 3j
        assert_close(run("irfft", up(h, device), n), np.fft.irfft(h.astype(np.complex128), n))


# One product (n <= 64: 1, 2, 16, 17 pad to 16 or 32, 48 and 64 to 64) and two (100 = 10 x 10,
# 400 = 16 x 25, 512 = 16 x 32, 1000 = 20 x 50, 2048 = 32 x 64, 4096 = 64 x 64); the factors
# padded to 64 (48, 64, 1000, 2048, 4096) run in chunks of fft_fused.CHUNK.
FUSED_LENGTHS = [1, 2, 16, 17, 48, 64, 100, 400, 512, 1000, 2048, 4096]
NORMS = ["backward", "ortho", "forward"]
ROWS = 19  # not a multiple of any ROWS (1..16 with the small tiles below)


@pytest.mark.parametrize("dot", tff.DOTS)
@pytest.mark.parametrize("n", FUSED_LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_fused(
    device: str, op: str, n: int, dot: str, monkeypatch: pytest.MonkeyPatch, fused_calls: list[int]
) -> None:
    """19 rows in programs of 1..16 rows (the last one ragged), a non-contiguous input (rows
    transposed in memory, or every other element), a poisoned out=, the norms in turn."""
    monkeypatch.setattr(tff, "DOT", dot)
    # 4096 (16 chunk pairs a program) in 4 rows a program: the interpreter's cost is per program.
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 1024 if n < 4096 else 16384)
    norm = NORMS[(FUSED_LENGTHS.index(n) + OPS.index(op)) % 3]
    rng = np.random.default_rng(seed("tfft-fused", op, n, dot))
    x = signal(rng, (ROWS, in_len(op, n)), op)
    out = poisoned((ROWS, n // 2 + 1 if op == "rfft" else n), tfft_dtype(op), device)
    xd = view(x, "transposed" if dot == "ieee" else "strided", device)
    assert not xd.is_contiguous() or in_len(op, n) == 1
    assert run(op, xd, n, norm, out=out) is out
    assert fused_calls == [n]
    assert_close(pairs(out), pairs(expected(op, x, n=n, norm=norm)), "float32", name=f"{op} {n}")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [48, 400, 401])  # one product, two, Bluestein over 2 x 1024
def test_fused_norms_and_bluestein(
    device: str, op: str, n: int, norm: str, fused_calls: list[int]
) -> None:
    rng = np.random.default_rng(seed("tfft-fused-norm", op, n, norm))
    x = signal(rng, (2, 3, in_len(op, n)), op)
    r = run(op, up(x, device), n, norm)
    assert fused_calls == ([1024, 1024] if n == 401 else [n])
    assert_close(pairs(r), pairs(expected(op, x, n=n, norm=norm)), "float32")


@pytest.mark.parametrize("op", OPS)
def test_fused_many_programs_wide_batch(
    device: str, op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows over three lead dims that do not merge (2-D row addressing), 16 rows a program."""
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 16 * 64)
    rng = np.random.default_rng(seed("tfft-fused-wide", op))
    x = signal(rng, (3, 5, 7, in_len(op, 64)), op)
    xd = up(np.swapaxes(x, 0, 1), device).swapaxes(0, 1)
    assert_close(pairs(run(op, xd, 64)), pairs(expected(op, x, n=64)), "float32")


@pytest.mark.parametrize("dot", tff.DOTS)
@pytest.mark.parametrize("chunk", [32, 64])  # 16 (ieee) and 64 (tf32x3) run in test_fused
@pytest.mark.parametrize(("op", "n"), [("rfft", 1000), ("ifft", 4096), ("irfft", 2048)])
def test_fused_chunk_widths(
    device: str, op: str, n: int, chunk: int, dot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Factors padded to 64 cut into chunks of 32, or not at all (64), with two rows a program
    over 5 rows (the last program ragged) and a strided input: the same transform."""
    monkeypatch.setattr(tff, "CHUNK", chunk)
    monkeypatch.setattr(tff, "DOT", dot)
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 4096 if n < 4096 else 8192)
    norm = NORMS[(chunk // 32 + len(dot)) % 3]
    rng = np.random.default_rng(seed("tfft-chunk", op, n, chunk, dot))
    x = signal(rng, (5, in_len(op, n)), op)
    out = poisoned((5, n // 2 + 1 if op == "rfft" else n), tfft_dtype(op), device)
    assert run(op, view(x, "strided", device), n, norm, out=out) is out
    assert_close(pairs(out), pairs(expected(op, x, n=n, norm=norm)), "float32", name=f"{op} {n}")


def test_fused_chunk_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only factors padded past CHUNK_OVER (to 64) are cut, every side to ieee's chunk of 16
    (tf32x3 keeps whole products: CHUNKS)."""
    monkeypatch.setattr(tff, "DOT", "ieee")
    got: list[dict[str, Any]] = []
    monkeypatch.setattr(tff, "launch", lambda k, grid, *a, **c: got.append(c))
    x = gp.from_numpy(np.zeros((1, 8192), np.float32), device="cpu")
    for n, c in [(2048, 64), (4096, 64), (400, 32), (48, 64)]:
        src = tff.Operand(x, (0, 0, 8192), 2)
        tff.fused_transform(src, src, 1, (1, 1), n=n, inverse=False, load=0, n_in=n,
                            n_log=n, n_out=n, real_out=False, scale=1.0)  # fmt: skip
        assert got[-1]["C"] == c
    q = [(c["Q1"], c["Q2"], c["QC"]) for c in got]
    assert q == [(32, 16, 64), (16, 16, 64), (16, 32, 32), (16, 1, 16)]


def test_fused_split_and_columns() -> None:
    assert fused_split(400, True, 201, False, True) == (16, 25)
    assert fused_split(2048, False, 2048, False, True) == (32, 64)
    assert fused_split(64, False, 64, False, True) == (64, 1)
    assert fused_split(4099, False, 4099, False, True) is None  # 4099 is prime
    assert fused_split(8192, False, 8192, False, True) is None
    # rfft 2048 = 32 x 64: columns k2 < 32 and X[1024] summed apart; 400 = 16 x 25: k2 <= 12.
    assert out_cols(2048, 32, 64, 1025, True) == (32, True)
    assert out_cols(2048, 32, 64, 1025, False) == (64, False)
    assert out_cols(400, 16, 25, 201, True) == (16, False)
    assert out_cols(64, 64, 1, 33, True) == (32, True)


def test_fused_dot_choice(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tff, "DOT", "tf32")
    with pytest.raises(ValueError, match="PYGPUKIT_FFT_DOT"):
        run("fft", up(np.ones((2, 16), np.float32), device), 16)


def test_radices_cover_every_length() -> None:
    for n in range(1, 4098):
        rs = radices(n)
        if rs is None:
            assert max(p for p in range(2, n + 1) if n % p == 0 and _prime(p)) > RMAX
        else:
            assert int(np.prod(rs)) == n and max(rs) <= RMAX
    assert radices(400) == (25, 16) and radices(512) == (32, 16) and radices(97) is None


def _prime(p: int) -> bool:
    return p > 1 and all(p % q for q in range(2, int(p**0.5) + 1))


@GPU
@pytest.mark.parametrize("op", OPS)
def test_every_length_to_4097(device: str, op: str) -> None:
    rng = np.random.default_rng(seed("tfft-all", op))
    worst = (0.0, 0)
    for n in range(1, 4098):
        x = signal(rng, (2, in_len(op, n)), op)
        want = expected(op, x, n=n)
        got = pairs(run(op, up(x, device), n))
        err = float(np.linalg.norm(got - pairs(want)) / np.linalg.norm(pairs(want)))
        worst = max(worst, (err, n))
        assert_close(got, pairs(want), "float32", name=f"{op} n={n}")
    assert worst[0] <= 1e-5, worst


@GPU
def test_speech_batch(device: str) -> None:
    """Whisper's frames: 3000 frames of n_fft 400, and 512 / 2048-point frames."""
    rng = np.random.default_rng(3)
    for n in (400, 512, 2048):
        x = rand(rng, (2, 3000, n), "float32")
        assert_close(pairs(run("rfft", up(x, device), n)), pairs(expected("rfft", x)), "float32")


def frames_of(sig: np.ndarray, n: int, hop: int) -> np.ndarray:
    """[batch, frames, n] overlapping frames of [batch, samples] (librosa.util.frame)."""
    f = 1 + (sig.shape[-1] - n) // hop
    idx = np.arange(f)[:, None] * hop + np.arange(n)[None, :]
    return sig[:, idx]


@pytest.mark.parametrize("power", [None, 1.0, 2.0])
@pytest.mark.parametrize("dot", tff.DOTS)
@pytest.mark.parametrize(("n", "hop"), [(400, 160), (64, 16), (2048, 512), (401, 100), (18, 7)])
def test_rfft_windowed_overlapping_frames(
    device: str, n: int, hop: int, dot: str, power: float | None,
    monkeypatch: pytest.MonkeyPatch, fused_calls: list[int],
) -> None:  # fmt: skip
    """The STFT's step on an overlapping strided view of the frames (what audio.stft passes):
    the window multiplied in at load where the fused kernel serves n (400: two products, 64:
    one, 2048: through real pairs), and written out first otherwise (401: Bluestein, two fused
    launches of 1024 points without a window); all equal rfft(frames * window) in float64.
    With power 1 or 2 the magnitude or power, taken as the kernel stores (2048: in the complex
    rows used as scratch; 401: from the complex result), into a poisoned strided out=."""
    monkeypatch.setattr(tff, "DOT", dot)
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 4096)
    rng = np.random.default_rng(seed("tfft-win", n, hop, dot))
    sig = rand(rng, (2, n + 5 * hop + 3), "float32")
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)
    sd = up(sig, device)
    b, total = sig.shape
    nf = 1 + (total - n) // hop
    frames = sd._view((b, nf, n), (total, hop, 1), sd._offset)
    assert not frames.is_contiguous()
    want = np.fft.rfft(frames_of(as64(sig), n, hop) * as64(win), axis=-1)
    if power is None:
        out = poisoned((b, nf, n // 2 + 1), gp.complex64, device)
    else:
        want = np.abs(want) ** power
        out = poisoned((b, nf, 2 * (n // 2 + 1)), gp.float32, device)[..., ::2]
    got = tfft.rfft_windowed(frames, up(win, device), n=n, power=power, out=out)
    assert got is out
    assert fused_calls == ([1024, 1024] if n == 401 else [n])
    assert_close(pairs(out), pairs(want), "float32", name=f"rfft_windowed {n} {power}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_rfft_windowed_dtypes(device: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("tfft-win-dt", dtype))
    x = rand(rng, (3, 400), dtype)
    w = rand(rng, (400,), dtype)
    got = tfft.rfft_windowed(up(x, device), up(w, device), n=400, norm="ortho")
    want = np.fft.rfft(as64(x) * as64(w), norm="ortho")
    assert_close(pairs(got), pairs(want), "float32")


@pytest.fixture
def pairs_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The n of every rfft the fused kernel runs through real pairs during the test."""
    calls: list[int] = []
    real = tff.untangle

    def spy(n: int, dev: Any) -> Any:
        calls.append(n)
        return real(n, dev)

    monkeypatch.setattr(tff, "untangle", spy)
    return calls


@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize(
    ("n", "n_in"), [(4, 4), (6, 5), (10, 10), (18, 23), (50, 50), (100, 99), (512, 512),
                    (1000, 1000), (2048, 2048), (4096, 4096), (8192, 8000)],
)  # fmt: skip
def test_rfft_real_pairs(
    device: str, n: int, n_in: int, forced: bool, monkeypatch: pytest.MonkeyPatch,
    pairs_calls: list[int],
) -> None:  # fmt: skip
    """rfft of even n as the complex n / 2-point transform of x's pairs and the untangling
    step: where fft_plan.real_pairs picks it, and forced for small n (n / 2 odd: 3, 5, 9, 25,
    the pair k = n / 4 absent), with a truncated or zero-padded input, a strided input, 7 rows
    over programs of several rows, every norm in turn, a poisoned out=; and with PAIRS off the
    real transform (no untangling) gives the same values."""
    if forced:
        monkeypatch.setattr(tff, "real_pairs", lambda n: True)
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 4096)
    norm = NORMS[(n + forced) % 3]
    rng = np.random.default_rng(seed("tfft-pairs", n, n_in, forced))
    x = rand(rng, (7, n_in), "float32")
    want = np.fft.rfft(as64(x), n=n, norm=norm)
    uses = forced or tff.real_pairs(n)
    for on in (True, False):
        monkeypatch.setattr(tff, "PAIRS", on)
        pairs_calls.clear()
        out = poisoned((7, n // 2 + 1), gp.complex64, device)
        assert run("rfft", view(x, "strided", device), n, norm, out=out) is out
        assert pairs_calls == ([n] if on and uses else [])
        assert_close(pairs(out), pairs(want), "float32", name=f"rfft {n} pairs={on}")
        # The power as the kernel stores it: in place of the pairs' complex rows (every pair
        # read before the first value lands) or straight into the float result.
        ones = up(np.ones(n, np.float32), device)
        pw = tfft.rfft_windowed(view(x, "strided", device)[:, :n] if n_in >= n else
                                up(np.pad(x, ((0, 0), (0, n - n_in))), device),
                                ones, n=n, norm=norm, power=2.0)  # fmt: skip
        assert pairs_calls == ([n, n] if on and uses else [])
        want_p = np.abs(np.fft.rfft(as64(x)[:, :n], n=n, norm=norm)) ** 2
        assert_close(pw, want_p, "float32", name=f"power {n} pairs={on}")


def test_real_pairs_choice() -> None:
    """Pairs where the real transform pads a factor to 64 and the half length costs less
    (1000, 2048, 4096) and where only the half fits one launch (8192); not for 400 or 512
    (no factor of 64; 512 measured slower through pairs) or odd n."""
    from pygpukit.backends.triton_kernels.fft_plan import real_pairs

    assert [n for n in (2, 3, 400, 401, 512, 1000, 2048, 4096, 8192) if real_pairs(n)] == [
        1000, 2048, 4096, 8192,
    ]  # fmt: skip
    assert tff.fusable(8192, rfft=True) and not tff.fusable(8192)


@pytest.mark.parametrize("power", [None, 2.0])
@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric", "edge"])
@pytest.mark.parametrize(("n_fft", "hop"), [(400, 160), (64, 48), (2048, 512), (401, 100)])
def test_rfft_frames_pads_in_the_loads(
    device: str, n_fft: int, hop: int, mode: str, power: float | None,
    monkeypatch: pytest.MonkeyPatch, fused_calls: list[int],
) -> None:  # fmt: skip
    """The frames of a padded signal read in the fused kernel's loads (pad_index): 400 (two
    products), 64 (one), 2048 (real pairs; with power, the complex rows as scratch) in one
    launch over a row-strided signal (rows 2 samples apart in a wider buffer) and the last
    frame dropped (n_frames); 401 (not fused) through a padded copy and Bluestein. Signal
    lengths: shorter than a frame, about one frame, and several frames."""
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 4096)
    rng = np.random.default_rng(seed("tfft-frames", n_fft, hop, mode, power))
    pad = n_fft // 2
    win = rand(rng, (n_fft,), "float32")
    for n in (pad + 1, n_fft + 3, 3 * n_fft + hop + 1):
        sig = rand(rng, (3, n + 2), "float32")
        yd = up(sig, device)[:, 1 : n + 1]
        assert not yd.is_contiguous()
        count = 1 + (n + 2 * pad - n_fft) // hop
        keep = max(1, count - 1)
        fused_calls.clear()
        got = tfft.rfft_frames(yd, up(win, device), n=n_fft, hop=hop, pad=pad, pad_mode=mode,
                               n_frames=keep, power=power)  # fmt: skip
        assert fused_calls == ([1024, 1024] if n_fft == 401 else [n_fft])
        yp = np.pad(as64(sig)[:, 1 : n + 1], ((0, 0), (pad, pad)), mode=mode)
        want = np.fft.rfft(frames_of(yp, n_fft, hop)[:, :keep] * as64(win), axis=-1)
        if power is not None:
            want = np.abs(want) ** power
        assert got.shape == want.shape
        assert_close(pairs(got), pairs(want), "float32", name=f"frames {n_fft} {mode} n={n}")


@pytest.mark.parametrize("power", [None, 1.0])
@pytest.mark.parametrize("n_fft", [25, 256, 2048, 401])
def test_rfft_frames_without_padding(
    device: str, n_fft: int, power: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pad = 0 (stft with center=False): each frame still starts hop samples after the last
    (the frame addressing runs with nothing outside the signal); over a column-strided signal
    (every other sample of a wider buffer), into a poisoned strided out=; an odd length in
    one launch (25 = 5 x 5), a real-pairs length (2048; power 1 through the scratch rows) and
    the padded-copy fallback (401)."""
    monkeypatch.setattr(tff, "_INTERPRET_POINTS", 4096)
    rng = np.random.default_rng(seed("tfft-frames-nopad", n_fft, power))
    hop = max(1, n_fft // 3)
    n = n_fft + 4 * hop + 2
    sig = rand(rng, (2, 2 * n), "float32")
    yd = up(sig, device)[:, ::2]
    win = rand(rng, (n_fft,), "float32")
    count = 1 + (n - n_fft) // hop
    nb = n_fft // 2 + 1
    dt = gp.complex64 if power is None else gp.float32
    out = poisoned((2, count, 2 * nb), dt, device)[..., ::2]
    got = tfft.rfft_frames(yd, up(win, device), n=n_fft, hop=hop, pad=0, pad_mode="constant",
                           n_frames=count, power=power, out=out)  # fmt: skip
    assert got is out
    want = np.fft.rfft(frames_of(as64(sig)[:, ::2], n_fft, hop) * as64(win), axis=-1)
    if power is not None:
        want = np.abs(want) ** power
    assert_close(pairs(out), pairs(want), "float32", name=f"frames pad 0 {n_fft}")


@pytest.mark.parametrize("n", [2048, 400])
def test_power_of_no_rows(device: str, n: int) -> None:
    """Zero rows with a power result: a float32 [0, n // 2 + 1] (2048 would take the complex
    scratch rows), and into an out= of that shape."""
    x = up(np.zeros((0, n), np.float32), device)
    w = up(np.ones(n, np.float32), device)
    r = tfft.rfft_windowed(x, w, n=n, power=2.0)
    assert r.shape == (0, n // 2 + 1) and r.dtype is gp.float32
    out = gp.empty((0, n // 2 + 1), gp.float32, device=device)
    assert tfft.rfft_windowed(x, w, n=n, power=2.0, out=out) is out
