"""The Triton FFT in float64 (float64 / complex128 in, complex128 / float64 out): the Stockham
passes and Bluestein with float64 tables and arithmetic, against numpy.fft in float64 under the
1e-12 bound.

Under the interpreter: one pass, two and three passes, radices that pad, Bluestein (97, 131,
4097), every norm (the scale reaches the kernel in float64: a float32 1/sqrt(n) would miss the
bound by 1e3), strided inputs and out=, n padding and truncation, the window and power of
rfft_windowed, and rfft_frames (the routed ops in float64: test_fft.py). On a GPU (marked gpu)
also every length 1..600, and powers of two past the native float64 kernel's reach.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _tkutil import GPU, poisoned, up, view

import pygpukit as gp
from pygpukit.backends.triton_kernels import fft as tfft

LENGTHS = [1, 2, 3, 7, 16, 17, 61, 64, 97, 400, 512, 1000, 2048, 4097]
OPS = ["fft", "ifft", "rfft", "irfft"]
_NP = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def pairs(z: Any) -> np.ndarray:
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if z.dtype.kind == "c" else z


def signal(rng: np.random.Generator, shape: tuple[int, ...], op: str) -> np.ndarray:
    """float64 for fft/rfft, complex128 for ifft/irfft."""
    re = rng.standard_normal(shape)
    return re if op in ("fft", "rfft") else re + 1j * rng.standard_normal(shape)


def in_len(op: str, n: int) -> int:
    return n // 2 + 1 if op == "irfft" else n


def out_len(op: str, n: int) -> int:
    return n // 2 + 1 if op == "rfft" else n


def result_dtype(op: str) -> gp.DataType:
    return gp.float64 if op == "irfft" else gp.complex128


def run(op: str, x: gp.GPUArray, n: int, norm: str = "backward", out: Any = None) -> Any:
    return getattr(tfft, op)(x, n=n, norm=norm, out=out)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_lengths(device: str, op: str, n: int, fused_calls: list[int]) -> None:
    """Every length through the passes or Bluestein, never the fp32 one-kernel path, into a
    poisoned out=."""
    rng = np.random.default_rng(n * 7 + OPS.index(op))
    x = signal(rng, (3, in_len(op, n)), op)
    out = poisoned((3, out_len(op, n)), result_dtype(op), device)
    assert run(op, up(x, device), n, out=out) is out
    assert_close(pairs(out), pairs(_NP[op](x, n=n)), "float64", name=f"{op} n={n}")
    assert fused_calls == []


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [400, 131])
def test_norms(device: str, op: str, norm: str, n: int) -> None:
    rng = np.random.default_rng(len(norm) * 31 + n)
    x = signal(rng, (2, in_len(op, n)), op)
    got = run(op, up(x, device), n, norm)
    assert got.dtype is result_dtype(op)
    assert_close(pairs(got), pairs(_NP[op](x, n=n, norm=norm)), "float64")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [5, 80, 131])  # truncate, pad; 131: a padded Bluestein input
def test_n_pads_and_truncates(device: str, op: str, n: int) -> None:
    rng = np.random.default_rng(n)
    x = signal(rng, (2, 70), op)
    assert_close(pairs(run(op, up(x, device), n)), pairs(_NP[op](x, n=n)), "float64")


@pytest.mark.parametrize("layout", ["transposed", "strided"])
@pytest.mark.parametrize("op", OPS)
def test_strided_inputs_and_outs(device: str, op: str, layout: str) -> None:
    n = 60
    rng = np.random.default_rng(len(layout) + OPS.index(op))
    x = signal(rng, (2, 3, in_len(op, n)), op)
    want = _NP[op](x, n=n)
    wide = poisoned((*want.shape[:-1], 2 * want.shape[-1]), result_dtype(op), device)
    out = wide[..., ::2]
    assert run(op, view(x, layout, device), n, out=out) is out
    assert_close(pairs(out), pairs(want), "float64")
    assert np.isnan(pairs(wide[..., 1::2])).all()


@pytest.mark.parametrize("power", [None, 1.0, 2.0])
@pytest.mark.parametrize("n", [400, 97])
def test_rfft_windowed(device: str, n: int, power: float | None) -> None:
    """The window multiplied in float64 and |X| ** power taken in float64 (a float64 result)."""
    rng = np.random.default_rng(n + (0 if power is None else int(power)))
    x = rng.standard_normal((2, 3, n))
    w = rng.random(n)
    got = tfft.rfft_windowed(up(x, device), up(w, device), n=n, norm="ortho", power=power)
    want = np.fft.rfft(x * w, norm="ortho")
    if power is not None:
        want = np.abs(want) ** power
    assert got.dtype is (gp.complex128 if power is None else gp.float64)
    assert_close(pairs(got), pairs(want), "float64")


@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_rfft_frames(device: str, mode: str, fused_calls: list[int]) -> None:
    """Frames of a padded signal in float64 (the padded copy, then the windowed transform; never
    the fp32 one-kernel path that reads frames in place)."""
    rng = np.random.default_rng(len(mode))
    n_fft, hop, pad = 400, 160, 200
    y = rng.standard_normal((2, 1600))
    win = rng.random(n_fft)
    frames = 1 + (1600 + 2 * pad - n_fft) // hop
    got = tfft.rfft_frames(
        up(y, device), up(win, device), n=n_fft, hop=hop, pad=pad, pad_mode=mode,
        n_frames=frames, power=2.0,
    )  # fmt: skip
    yp = np.pad(y, ((0, 0), (pad, pad)), mode=mode)
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    want = np.abs(np.fft.rfft(yp[:, idx] * win)) ** 2
    assert got.dtype is gp.float64
    assert_close(got.to_numpy(), want, "float64")
    assert fused_calls == []


def test_the_one_kernel_path_serves_float32_only(device: str, fused_calls: list[int]) -> None:
    """The same length and op: float32 through the one-kernel path (complex64), float64 through
    the passes (complex128, to the float64 bound)."""
    calls = fused_calls
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 400))
    want = np.fft.rfft(x, norm="ortho")
    got32 = run("rfft", up(x.astype(np.float32), device), 400, "ortho")
    assert calls == [400] and got32.dtype is gp.complex64
    got64 = run("rfft", up(x, device), 400, "ortho")
    assert calls == [400] and got64.dtype is gp.complex128
    assert_close(pairs(got64), pairs(want), "float64")
    assert_close(pairs(got32), pairs(np.fft.rfft(x.astype(np.float32).astype(np.float64),
                                                 norm="ortho")), "float32")  # fmt: skip


@GPU
@pytest.mark.parametrize("op", OPS)
def test_every_length_to_600(device: str, op: str) -> None:
    rng = np.random.default_rng(OPS.index(op))
    for n in range(1, 601):
        x = signal(rng, (2, in_len(op, n)), op)
        assert_close(pairs(run(op, up(x, device), n)), pairs(_NP[op](x, n=n)), "float64",
                     name=f"{op} n={n}")  # fmt: skip


@GPU
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [8192, 1 << 14])
def test_routed_past_the_native_float64_lengths(device: str, op: str, n: int) -> None:
    """Powers of two the native float64 kernel does not reach route to Triton, in float64."""
    rng = np.random.default_rng(n + OPS.index(op))
    x = signal(rng, (2, in_len(op, n)), op)
    gp.routing.reset_stats()
    got = getattr(gp.fft, op)(up(x, device), n=n)
    assert gp.routing.stats()[op] == {"triton": 1}
    assert got.dtype is result_dtype(op)
    assert_close(pairs(got), pairs(_NP[op](x, n=n)), "float64")


@GPU
def test_same_bits_and_graph_replay(device: str) -> None:
    """Run to run the same bits; a captured call replays to the eager call's bits (the passes
    and Bluestein in float64; the first calls upload the plans)."""
    rng = np.random.default_rng(12)
    sig = up(rng.standard_normal((3, 16000)), device)
    win = up(np.hanning(400), device)
    z = up(rng.standard_normal((5, 131)) + 1j * rng.standard_normal((5, 131)), device)

    def call() -> tuple[gp.GPUArray, gp.GPUArray]:
        frames = tfft.rfft_frames(sig, win, n=400, hop=160, pad=200, pad_mode="reflect",
                                  n_frames=101, power=2.0)  # fmt: skip
        return frames, tfft.fft(z, n=131, norm="ortho")

    def bits(rs: Any) -> list[np.ndarray]:
        return [r.to_numpy().view(np.uint64) for r in rs]

    a, b = bits(call()), bits(call())
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    g = gp.CUDAGraph(device)
    with g.capture():
        res = call()
    g.replay()
    gp.synchronize()
    assert all(np.array_equal(x, y) for x, y in zip(bits(res), a, strict=True))
