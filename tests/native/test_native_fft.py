"""Native twin of the FFT ops (native/src/fft/fft.cu) on the GPU: the public ops with the route
forced to native, against numpy.fft in float64, at every power-of-two length the kernel serves
(test_native_fft_mixed.py: every other length), with strided and truncated/padded inputs, half
inputs, windows, powers, STFT frames in every pad mode, strided out=, zero rows, determinism and
graph capture at powers of two, 7-smooth and Bluestein lengths; and the routing of lengths it
does not serve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
import pygpukit.ops.fft as ops_fft
from pygpukit.errors import RouteError

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
_FFT_OPS = ("fft", "ifft", "rfft", "irfft", "rfft_windowed", "rfft_frames")
_NP = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def pairs(z: Any) -> np.ndarray:
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if z.dtype.kind == "c" else z


def up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device=DEV)


def poisoned(shape: tuple[int, ...], dtype: Any) -> gp.GPUArray:
    """An out= buffer full of NaN (both parts of a complex), so an unwritten value shows."""
    nan = float("nan")
    return gp.full(shape, complex(nan, nan) if dtype is gp.complex64 else nan, dtype=dtype,
                   device=DEV)  # fmt: skip


def complex_signal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (as64(rand(rng, shape, "float32")) + 1j * as64(rand(rng, shape, "float32"))).astype(
        np.complex64
    )


@pytest.fixture(autouse=True)
def _native() -> Any:
    with gp.route(",".join(f"{op}:native" for op in _FFT_OPS)):
        gp.routing.reset_stats()
        yield
        ran = {op: by for op, by in gp.routing.stats().items() if op in _FFT_OPS}
        assert all(set(by) <= {"native"} for by in ran.values()), ran


@pytest.mark.parametrize("k", range(13))
@pytest.mark.parametrize("op", ["fft", "ifft"])
def test_complex_lengths(op: str, k: int) -> None:
    """Every 2^k <= 4096, complex and real input, each norm."""
    n = 1 << k
    rng = np.random.default_rng(seed("nfft", op, n))
    x = complex_signal(rng, (5, n))
    for norm in (None, "ortho", "forward"):
        got = getattr(gp.fft, op)(up(x), norm=norm)
        want = _NP[op](x.astype(np.complex128), norm=norm)
        assert_close(pairs(got), pairs(want), "float32", name=f"{op} {n} {norm}")
    xr = rand(rng, (3, n), "float32")
    got = getattr(gp.fft, op)(up(xr))
    assert_close(pairs(got), pairs(_NP[op](as64(xr))), "float32", name=f"{op} real {n}")


@pytest.mark.parametrize("k", range(1, 14))
def test_real_lengths(k: int) -> None:
    """rfft and irfft at every even 2^k <= 8192 (real pairs), each norm."""
    n = 1 << k
    rng = np.random.default_rng(seed("nrfft", n))
    x = rand(rng, (4, n), "float32")
    for norm in (None, "ortho", "forward"):
        got = gp.fft.rfft(up(x), norm=norm)
        assert_close(pairs(got), pairs(np.fft.rfft(as64(x), norm=norm)), "float32",
                     name=f"rfft {n} {norm}")  # fmt: skip
    z = complex_signal(rng, (4, n // 2 + 1))  # DC and Nyquist imaginary parts are ignored
    for norm in (None, "ortho", "forward"):
        got = gp.fft.irfft(up(z), n=n, norm=norm)
        want = np.fft.irfft(z.astype(np.complex128), n=n, norm=norm)
        assert_close(got.to_numpy(), want, "float32", name=f"irfft {n} {norm}")


@pytest.mark.parametrize("op", ["fft", "rfft", "irfft"])
def test_truncated_and_padded_strided(op: str) -> None:
    """n shorter and longer than the input, rows of a non-contiguous 3-D view (three lead dims'
    strides, a column stride), into a strided poisoned out=."""
    rng = np.random.default_rng(seed("nfft-pad", op))
    base = (
        complex_signal(rng, (2, 7, 3, 300))
        if op != "rfft"
        else rand(rng, (2, 7, 3, 300), "float32")
    )
    view = up(base)[:, 1:6, ::2, ::2]  # [2, 5, 2, 150], element stride 2
    host = base[:, 1:6, ::2, ::2]
    # powers of two, 7-smooth lengths (the mixed-radix kernel) and Bluestein's
    for n in (64, 256, 240, 400, 750, {"fft": 401, "rfft": 802, "irfft": 802}[op]):
        m = n // 2 + 1 if op == "rfft" else n
        dt = gp.float32 if op == "irfft" else gp.complex64
        out = poisoned((2, 5, 2, 2 * m), dt)[..., ::2]
        got = getattr(gp.fft, op)(view, n=n, out=out)
        assert got is out
        want = _NP[op](host.astype(np.complex128 if op != "rfft" else np.float64), n=n)
        assert_close(pairs(got), pairs(want), "float32", name=f"{op} n={n}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs(dtype: str) -> None:
    """Half inputs at a power of two, a 7-smooth length and Bluestein's (rfft 802, fft 401)."""
    rng = np.random.default_rng(seed("nfft-half", dtype))
    for n_r, n_c in ((512, 512), (400, 400), (802, 401)):
        x = rand(rng, (3, n_r), dtype)
        got = gp.fft.rfft(up(x))
        assert_close(pairs(got), pairs(np.fft.rfft(as64(x))), "float32", name=f"rfft {n_r}")
        x = rand(rng, (3, n_c), dtype)
        got = gp.fft.fft(up(x))
        assert_close(pairs(got), pairs(np.fft.fft(as64(x))), "float32", name=f"fft {n_c}")


@pytest.mark.parametrize("power", [None, 1.0, 2.0])
@pytest.mark.parametrize("n", [2, 16, 512, 2048, 8192, 6, 400, 1000, 6000, 802])
def test_rfft_windowed(n: int, power: float | None) -> None:
    """Overlapping strided frames of a signal (never copied), the window at load, the power at
    the store into a compact result."""
    rng = np.random.default_rng(seed("nfft-win", n, power))
    hop = max(1, n // 4)
    sig = rand(rng, (2, 6 * n), "float32")
    count = 1 + (6 * n - n) // hop
    y = up(sig)
    frames = y._view((2, count, n), (6 * n, hop, 1), y._offset)
    win = rand(rng, (n,), "float32")
    got = ops_fft.rfft_windowed(frames, up(win), power=power)
    idx = np.arange(count)[:, None] * hop + np.arange(n)[None, :]
    want = np.fft.rfft(as64(sig)[:, idx] * as64(win), axis=-1)
    if power is not None:
        want = np.abs(want) ** power
        assert got.is_contiguous()
    assert_close(pairs(got), pairs(want), "float32", name=f"windowed {n} {power}")


@pytest.mark.parametrize("power", [None, 2.0])
@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric", "edge"])
@pytest.mark.parametrize("n_fft", [4, 512, 2048, 400, 1200, 802])
def test_rfft_frames(n_fft: int, mode: str, power: float | None) -> None:
    """STFT frames at signal lengths around one frame, centre padding in every mode, a
    column-strided signal, n_frames below the count, and pad = 0."""
    rng = np.random.default_rng(seed("nfft-frames", n_fft, mode, power))
    hop, pad = max(1, n_fft // 4), n_fft // 2
    win = rand(rng, (n_fft,), "float32")
    for n in (pad + 1, n_fft + 3, 3 * n_fft + hop + 1):
        sig = rand(rng, (3, 2 * n), "float32")
        yd = up(sig)[:, ::2]
        count = 1 + (n + 2 * pad - n_fft) // hop
        keep = max(1, count - 1)
        got = ops_fft.rfft_frames(yd, up(win), hop=hop, pad=pad, pad_mode=mode, n_frames=keep,
                                  power=power)  # fmt: skip
        yp = np.pad(as64(sig)[:, ::2], ((0, 0), (pad, pad)), mode=mode)  # type: ignore[call-overload]
        idx = np.arange(keep)[:, None] * hop + np.arange(n_fft)[None, :]
        want = np.fft.rfft(yp[:, idx] * as64(win), axis=-1)
        if power is not None:
            want = np.abs(want) ** power
        assert_close(pairs(got), pairs(want), "float32", name=f"frames {n_fft} {mode} {n}")
    if n_fft > 4:
        sig = rand(rng, (2, 5 * n_fft), "float32")
        got = ops_fft.rfft_frames(up(sig), up(win), hop=hop, power=power)
        idx = np.arange(got.shape[1])[:, None] * hop + np.arange(n_fft)[None, :]
        want = np.fft.rfft(as64(sig)[:, idx] * as64(win), axis=-1)
        if power is not None:
            want = np.abs(want) ** power
        assert_close(pairs(got), pairs(want), "float32", name=f"frames {n_fft} pad 0")


@pytest.mark.parametrize("power", [None, 2.0])
def test_window_at_an_odd_offset(power: float | None) -> None:
    """A window view starting at an odd float (4 bytes off the 8-byte alignment of the fast
    path's paired loads), for rfft_frames and rfft_windowed."""
    rng = np.random.default_rng(seed("nfft-odd-win", power))
    wide = rand(rng, (513,), "float32")
    win = up(wide)[1:]
    assert win.data_ptr() % 8 == 4
    sig = rand(rng, (2, 4096), "float32")
    got = ops_fft.rfft_frames(up(sig), win, hop=128, power=power)
    idx = np.arange(got.shape[1])[:, None] * 128 + np.arange(512)[None, :]
    want = np.fft.rfft(as64(sig)[:, idx] * as64(wide[1:]), axis=-1)
    if power is not None:
        want = np.abs(want) ** power
    assert_close(pairs(got), pairs(want), "float32", name="odd window frames")
    got = ops_fft.rfft_windowed(up(sig[:, :512]), win, power=power)
    want = np.fft.rfft(as64(sig[:, :512]) * as64(wide[1:]), axis=-1)
    if power is not None:
        want = np.abs(want) ** power
    assert_close(pairs(got), pairs(want), "float32", name="odd window rows")


def test_zero_rows_and_bad_lengths() -> None:
    x = gp.empty((0, 64), gp.float32, DEV)
    assert gp.fft.rfft(x).shape == (0, 33)
    frames = ops_fft.rfft_frames(gp.empty((0, 4096), gp.float32, DEV),
                                 up(np.ones(512, np.float32)), hop=128, power=2.0)  # fmt: skip
    assert frames.shape == (0, 29, 257)
    for op, n in (("fft", 2053), ("rfft", 1001), ("fft", 8192), ("irfft", 1)):
        xx = up(np.ones((2, 10), np.complex64 if op == "irfft" else np.float32))
        with pytest.raises(RouteError, match="prime factors in"):
            getattr(gp.fft, op)(xx, n=n)
    # The runtime stays usable after a refusal.
    got = gp.fft.fft(up(np.ones((1, 8), np.float32)))
    assert_close(pairs(got), pairs(np.fft.fft(np.ones((1, 8)))), "float32", name="after")


@pytest.mark.parametrize(("n_fft", "hop"), [(2048, 512), (400, 160), (802, 160)])
def test_same_bits_and_graph_replay(n_fft: int, hop: int) -> None:
    """Run to run the same bits; a captured call replays to the eager call's bits (the STFT
    2048 / 512, Whisper's 400 / 160 and a Bluestein length)."""
    rng = np.random.default_rng(seed("nfft-det", n_fft))
    sig = up(rand(rng, (4, 48000), "float32"))
    win = up(np.hanning(n_fft).astype(np.float32))

    def call() -> gp.GPUArray:
        return ops_fft.rfft_frames(sig, win, hop=hop, pad=n_fft // 2, pad_mode="reflect",
                                   power=2.0)  # fmt: skip

    a, b = call().to_numpy(), call().to_numpy()  # the first call uploads the twiddle table
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    g = gp.CUDAGraph(DEV)
    with g.capture():
        res = call()
    g.replay()
    gp.synchronize()
    assert np.array_equal(res.to_numpy().view(np.uint32), a.view(np.uint32))


@pytest.mark.parametrize("k", range(12))
def test_float64_complex(k: int) -> None:
    """complex128 fft/ifft and float64 input at every 2^k <= 2048, to float64's bound."""
    n = 1 << k
    rng = np.random.default_rng(seed("nfft64", n))
    z = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    for op in ("fft", "ifft"):
        got = getattr(gp.fft, op)(up(z), norm="ortho")
        assert got.dtype is gp.complex128
        assert_close(pairs(got), pairs(_NP[op](z, norm="ortho")), "float64", name=f"{op} {n}")
    xr = rng.standard_normal((2, n))
    got = gp.fft.fft(up(xr))
    assert_close(pairs(got), pairs(np.fft.fft(xr)), "float64", name=f"fft real {n}")


@pytest.mark.parametrize("k", range(1, 13))
def test_float64_real(k: int) -> None:
    """float64 rfft, irfft, and STFT frames with a power, at every even 2^k <= 4096."""
    n = 1 << k
    rng = np.random.default_rng(seed("nrfft64", n))
    x = rng.standard_normal((3, n))
    got = gp.fft.rfft(up(x))
    assert got.dtype is gp.complex128
    assert_close(pairs(got), pairs(np.fft.rfft(x)), "float64", name=f"rfft {n}")
    z = rng.standard_normal((3, n // 2 + 1)) + 1j * rng.standard_normal((3, n // 2 + 1))
    got = gp.fft.irfft(up(z), n=n)
    assert got.dtype is gp.float64
    assert_close(got.to_numpy(), np.fft.irfft(z, n=n), "float64", name=f"irfft {n}")
    if n >= 4:
        sig, win = rng.standard_normal((2, 5 * n)), rng.standard_normal(n)
        hop = n // 4
        got = ops_fft.rfft_frames(up(sig), up(win), hop=hop, pad=n // 2, pad_mode="reflect",
                                  power=2.0)  # fmt: skip
        yp = np.pad(sig, ((0, 0), (n // 2, n // 2)), mode="reflect")
        idx = np.arange(got.shape[1])[:, None] * hop + np.arange(n)[None, :]
        want = np.abs(np.fft.rfft(yp[:, idx] * win, axis=-1)) ** 2
        assert got.dtype is gp.float64
        assert_close(got.to_numpy(), want, "float64", name=f"frames {n}")


def test_float64_refusals() -> None:
    """float64 past the native kernel's float64 lengths is refused by the forced native route
    (this module's fixture), naming the constraint (the table's default sends them to Triton)."""
    with pytest.raises(RouteError, match="prime factors in"):
        gp.fft.fft(up(np.ones((2, 4096), np.complex128)))
    with pytest.raises(RouteError, match="prime factors in"):
        gp.fft.rfft(up(np.ones((2, 8192), np.float64)))
