"""Public gp.fft.fft/ifft/rfft/irfft on the test device (ops._helpers.DEVICE, CPU by default)
against numpy.fft in float64: every norm, n padding and truncation, lengths 1..4097 (primes,
400, 512, 2048), batched and non-contiguous inputs, other axes, out=, and bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
import pygpukit.ops.fft as ops_fft
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view

NORMS = [None, "backward", "ortho", "forward"]
# Sampled lengths: tiny, primes (small and large), powers of two, the speech-frame sizes, the
# largest of the sweep and numbers with many small factors.
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 61, 64, 97, 127, 251, 400, 509, 512, 1000]
LENGTHS += [1009, 2048, 2310, 4096, 4097]
OPS = ["fft", "ifft", "rfft", "irfft"]
_NP = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def pairs(z: Any) -> np.ndarray:
    """A complex result as its float (real, imaginary) pairs [..., 2], what assert_close reads."""
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    if z.dtype.kind != "c":
        return z
    return np.stack([z.real, z.imag], axis=-1)


def signal(rng: np.random.Generator, shape: tuple[int, ...], op: str, dtype: str) -> np.ndarray:
    """Random input of the op's kind: complex for ifft/irfft-style inputs, real otherwise."""
    re = rand(rng, shape, dtype)
    if op != "irfft":
        return re
    cdt = np.complex128 if dtype == "float64" else np.complex64
    return (as64(re) + 1j * as64(rand(rng, shape, dtype))).astype(cdt)


def expected(op: str, x: np.ndarray, **kw: Any) -> np.ndarray:
    x64 = x.astype(np.complex128) if x.dtype.kind == "c" else as64(x)
    return _NP[op](x64, **kw)


def bound(x: np.ndarray) -> str:
    return "float64" if x.dtype in (np.float64, np.complex128) else "float32"


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_lengths(op: str, n: int) -> None:
    rng = np.random.default_rng(seed("fft-len", op, n))
    m = n // 2 + 1 if op == "irfft" else n
    x = signal(rng, (3, m), op, "float32")
    kw = {"n": n} if op == "irfft" else {}
    r = getattr(gp.fft, op)(up(x), **kw)
    want = expected(op, x, **kw)
    assert r.shape == want.shape
    assert r.dtype is (gp.float32 if op == "irfft" else gp.complex64)
    assert_close(pairs(r), pairs(want), "float32")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [7, 400, 97])
def test_norms(op: str, norm: str | None, n: int) -> None:
    rng = np.random.default_rng(seed("fft-norm", op, norm, n))
    x = signal(rng, (2, n), op, "float32")
    r = getattr(gp.fft, op)(up(x), n=n, norm=norm)
    assert_close(pairs(r), pairs(expected(op, x, n=n, norm=norm)), "float32")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 5, 16, 33, 400, 600])
def test_n_pads_and_truncates(op: str, n: int) -> None:
    rng = np.random.default_rng(seed("fft-n", op, n))
    x = signal(rng, (2, 3, 40), op, "float32")
    r = getattr(gp.fft, op)(up(x), n=n)
    assert_close(pairs(r), pairs(expected(op, x, n=n)), "float32")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS)
def test_batched_and_non_contiguous(op: str, layout: str) -> None:
    rng = np.random.default_rng(seed("fft-lay", op, layout))
    for shape in [(5, 24), (2, 3, 45), (2, 2, 2, 12)]:
        x = signal(rng, shape, op, "float32")
        r = getattr(gp.fft, op)(view(x, layout))
        assert r.is_contiguous()
        assert_close(pairs(r), pairs(expected(op, x)), "float32")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [0, 1, -2])
def test_other_axes(op: str, axis: int) -> None:
    rng = np.random.default_rng(seed("fft-axis", op, axis))
    x = signal(rng, (6, 9, 4), op, "float32")
    r = getattr(gp.fft, op)(view(x, "transposed"), n=10, axis=axis)
    assert r.is_contiguous()
    assert_close(pairs(r), pairs(expected(op, x, n=10, axis=axis)), "float32")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [-1, 0])
def test_out(op: str, axis: int) -> None:
    rng = np.random.default_rng(seed("fft-out", op, axis))
    x = signal(rng, (8, 8), op, "float32")
    want = expected(op, x, axis=axis)
    dt = gp.float32 if op == "irfft" else gp.complex64
    out = poisoned(want.shape, dt)
    assert getattr(gp.fft, op)(up(x), axis=axis, out=out) is out
    assert_close(pairs(out), pairs(want), "float32")
    wide = poisoned((*want.shape[:-1], 2 * want.shape[-1]), dt)
    strided = wide[..., ::2]
    assert getattr(gp.fft, op)(up(x), axis=axis, out=strided) is strided
    assert_close(pairs(strided), pairs(want), "float32")
    assert np.isnan(pairs(wide[..., 1::2])).all()  # the gaps stay untouched


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_dtypes(op: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("fft-dt", op, dtype))
    x = signal(rng, (3, 50), op, dtype)  # n = 50: Triton on the GPU, float64 included
    r = getattr(gp.fft, op)(up(x))
    double = dtype == "float64"
    if op == "irfft":
        assert r.dtype is (gp.float64 if double else gp.float32)
    else:
        assert r.dtype is (gp.complex128 if double else gp.complex64)
    assert_close(pairs(r), pairs(expected(op, x)), bound(pairs(r)))


@pytest.mark.parametrize("op", ["fft", "ifft"])
@pytest.mark.parametrize("cdt", [np.complex64, np.complex128])
def test_complex_input(op: str, cdt: type) -> None:
    rng = np.random.default_rng(seed("fft-cplx", op, cdt))
    x = (rng.standard_normal((4, 37)) + 1j * rng.standard_normal((4, 37))).astype(cdt)
    r = getattr(gp.fft, op)(up(x))
    assert r.dtype is gp.as_dtype(cdt)
    assert_close(pairs(r), pairs(expected(op, x)), bound(pairs(r)))


def test_round_trips_and_irfft_ignores_dc_and_nyquist_imaginary_parts() -> None:
    rng = np.random.default_rng(11)
    x = rand(rng, (4, 400), "float32")
    assert_close(gp.fft.irfft(gp.fft.rfft(up(x)), n=400), as64(x), "float32")
    z = gp.fft.ifft(gp.fft.fft(up(x)))
    assert_close(pairs(z), pairs(as64(x).astype(np.complex128)), "float32")
    h = np.fft.rfft(as64(x)).astype(np.complex64)
    h[:, 0] += 5j  # numpy.fft.irfft ignores these; so must gp.fft.irfft
    h[:, -1] -= 3j
    assert_close(gp.fft.irfft(up(h)), np.fft.irfft(h.astype(np.complex128)), "float32")


def test_namespace() -> None:
    assert gp.fft.rfft is ops_fft.rfft and gp.fft.irfft is ops_fft.irfft
    assert "fft" in gp.__all__ and not hasattr(gp, "rfft")


@pytest.mark.parametrize("op", ["fft", "rfft"])
def test_table_serves_float64_at_every_length(op: str) -> None:
    """float64 on the GPU: the native kernels at their 7-smooth lengths (any to half their
    top), Triton at every length. (On a CPU array the GPU candidates fail for the device alone,
    never for the dtype.)"""
    x = up(np.ones((2, 50)))
    cands = gp.routing.explain(op, x, n=2062).candidates  # 2 x 1031: past Bluestein's top
    triton = [w for b, w in cands if b == "triton"]
    native64 = [w for b, w in cands if b == "native"][1]
    assert triton and not any("dtype" in r for r in triton[0]), cands
    assert not any("dtype" in r for r in native64), cands
    assert any("prime factors in" in r for r in native64), cands
    for n in (64, 50):
        assert gp.routing.explain(op, x, n=n).candidates[1][1] == [
            r for r in native64 if "prime factors in" not in r
        ]


@pytest.mark.parametrize(
    ("call", "exc", "msg"),
    [
        (lambda: gp.fft.fft(np.ones(4)), TypeError, r"fft: x must be a GPUArray, got ndarray"),
        (lambda: gp.fft.fft(up(np.ones(4, np.int32))), TypeError, r"fft: x must be a float"),
        (lambda: gp.fft.rfft(up(np.ones(4, np.complex64))), TypeError, r"rfft: x must be a real"),
        (lambda: gp.fft.irfft(up(np.ones(4, np.float32))), TypeError, r"irfft: x must be a compl"),
        (lambda: gp.fft.fft(gp.full((), 1.0)), ValueError, r"fft: x must have at least 1 dim"),
        (lambda: gp.fft.fft(up(np.ones(4, np.float32)), n=0), ValueError, r"fft: n must be >= 1"),
        (lambda: gp.fft.ifft(up(np.ones((2, 0), np.float32))), ValueError, r"ifft: n must be >="),
        (lambda: gp.fft.rfft(up(np.ones(4, np.float32)), n=2.0), TypeError, r"rfft: n must be an"),
        (lambda: gp.fft.fft(up(np.ones(4, np.float32)), n=True), TypeError, r"fft: n must be an"),
        (lambda: gp.fft.irfft(up(np.ones(1, np.complex64))), ValueError, r"irfft: n must be >= 1"),
        (lambda: gp.fft.fft(up(np.ones(4, np.float32)), norm="unit"), ValueError, r"fft: norm"),
        (lambda: gp.fft.rfft(up(np.ones((2, 4), np.float32)), axis=2), ValueError, r"axis 2"),
        (lambda: gp.fft.rfft(up(np.ones(4, np.float32)), axis=0.5), TypeError, r"axis must be"),
        (
            lambda: gp.fft.rfft(up(np.ones(8, np.float32)), out=gp.empty((8,), gp.complex64)),
            ValueError,
            r"rfft: out has shape \(8,\).*result has shape \(5,\)",
        ),
        (
            lambda: gp.fft.fft(up(np.ones(8, np.float32)), out=gp.empty((8,), gp.complex128)),
            TypeError,
            r"fft: out has .*complex128 but the result dtype is complex64",
        ),
    ],
)
def test_bad_input_names_the_argument(call, exc: type[Exception], msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=msg):
        call()


@pytest.mark.parametrize("power", [None, 1.0, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_rfft_windowed(dtype: str, norm: str | None, power: float | None) -> None:
    """rfft(x * window) along the last axis, or its magnitude / power, on overlapping strided
    frames as audio.stft passes them; float64 stays float64 (the CPU backend; on the GPU
    Triton in float64 at n = 400)."""
    rng = np.random.default_rng(seed("ops-fft-win", dtype, norm))
    sig = rand(rng, (2, 1000), dtype)
    win = rand(rng, (400,), dtype)
    sd = up(sig)
    frames = sd._view((2, 4, 400), (1000, 160, 1), sd._offset)
    got = ops_fft.rfft_windowed(frames, up(win), norm=norm, power=power)
    idx = np.arange(4)[:, None] * 160 + np.arange(400)[None, :]
    want = np.fft.rfft(as64(sig)[:, idx] * as64(win), norm=norm)
    if power is None:
        assert got.dtype is (gp.complex128 if dtype == "float64" else gp.complex64)
    else:
        want = np.abs(want) ** power
        assert got.dtype is (gp.float64 if dtype == "float64" else gp.float32)
    assert_close(pairs(got), pairs(want), bound(sig))
    out = gp.empty((2, 4, 201), got.dtype, device=DEVICE)
    assert ops_fft.rfft_windowed(frames, up(win), norm=norm, power=power, out=out) is out
    assert_close(pairs(out), pairs(want), bound(sig))


_X8 = np.ones((2, 8), np.float32)


@pytest.mark.parametrize(
    ("call", "exc", "msg"),
    [
        (lambda: ops_fft.rfft_windowed(_X8, up(_X8[0])), TypeError, r"x must be a GPUArray"),
        (lambda: ops_fft.rfft_windowed(up(_X8), _X8[0]), TypeError, r"window must be a GPUArray"),
        (
            lambda: ops_fft.rfft_windowed(up(_X8), up(np.ones(7, np.float32))),
            ValueError,
            r"rfft_windowed: window must have shape \(8,\)",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(_X8), up(np.ones(8))),
            TypeError,
            r"rfft_windowed: window must have x's dtype float32",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(_X8.astype(np.complex64)), up(_X8[0])),
            TypeError,
            r"rfft_windowed: x must be a real",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(_X8), up(_X8[0]), norm="unit"),
            ValueError,
            r"rfft_windowed: norm",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(np.ones((2, 0), np.float32)), up(_X8[0, :0])),
            ValueError,
            r"rfft_windowed: x's last dim \(the transform length\) must be >= 1, got 0",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(_X8), up(_X8[0]), power=3),
            ValueError,
            r"rfft_windowed: power must be None, 1.0 or 2.0, got 3",
        ),
        (
            lambda: ops_fft.rfft_windowed(up(_X8), up(_X8[0]), power=True),
            ValueError,
            r"rfft_windowed: power must be",
        ),
        (
            lambda: ops_fft.rfft_windowed(
                up(_X8), up(_X8[0]), power=2, out=gp.empty((2, 5), gp.complex64, device=DEVICE)
            ),
            TypeError,
            r"rfft_windowed: out has .*complex64 but the result dtype is float32",
        ),
        (
            lambda: ops_fft.rfft_windowed(
                up(_X8), up(_X8[0]), out=gp.empty((2, 8), gp.complex64, device=DEVICE)
            ),
            ValueError,
            r"rfft_windowed: out has shape \(2, 8\)",
        ),
    ],
)
def test_rfft_windowed_bad_input(call, exc: type[Exception], msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=msg):
        call()


@pytest.mark.parametrize("power", [None, 1.0])
@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric", "edge"])
def test_rfft_frames(mode: str, power: float | None) -> None:
    """The frames of y padded as np.pad's mode, windowed, transformed (and their magnitude),
    n_frames fewer than all, on the test device against numpy in float64."""
    rng = np.random.default_rng(seed("ops-frames", mode, power))
    y = rand(rng, (3, 1000), "float32")
    win = rand(rng, (400,), "float32")
    got = ops_fft.rfft_frames(
        up(y), up(win), hop=160, pad=200, pad_mode=mode, n_frames=6, power=power
    )
    yp = np.pad(as64(y), ((0, 0), (200, 200)), mode=mode)
    idx = np.arange(6)[:, None] * 160 + np.arange(400)[None, :]
    want = np.fft.rfft(yp[:, idx] * as64(win))
    if power is not None:
        want = np.abs(want)
    assert got.shape == (3, 6, 201)
    assert_close(pairs(got), pairs(want), "float32")
    full = ops_fft.rfft_frames(up(y), up(win), hop=160, pad=200, pad_mode=mode)
    assert full.shape == (3, 1 + (1000 + 400 - 400) // 160, 201)


_Y = np.ones((2, 10), np.float32)
_W4 = np.ones(4, np.float32)


@pytest.mark.parametrize(
    ("kw", "exc", "msg"),
    [
        ({"y": _Y[0]}, ValueError, r"rfft_frames: y must be \[batch, samples\]"),
        ({"window": np.ones((2, 2), np.float32)}, ValueError, r"window must be 1-D"),
        ({"window": np.ones(4)}, TypeError, r"window must have y's dtype float32"),
        ({"hop": 0}, ValueError, r"rfft_frames: hop must be >= 1, got 0"),
        ({"hop": 1.5}, TypeError, r"rfft_frames: hop must be an int"),
        ({"pad": -1}, ValueError, r"rfft_frames: pad must be >= 0"),
        ({"pad_mode": "wrap"}, ValueError, r"pad_mode"),
        ({"pad": 10, "pad_mode": "reflect"}, ValueError, r"needs more than pad=10 samples"),
        ({"pad": 11, "pad_mode": "symmetric"}, ValueError, r"needs at least pad=11 samples"),
        ({"window": np.ones(11, np.float32)}, ValueError, r"fewer than one frame of 11"),
        ({"n_frames": 9}, ValueError, r"n_frames=9 is more than the 7 frames"),
        ({"n_frames": 0}, ValueError, r"n_frames must be >= 1"),
        ({"power": 0.5}, ValueError, r"power must be None, 1.0 or 2.0"),
    ],
)
def test_rfft_frames_bad_input(kw: dict, exc: type[Exception], msg: str) -> None:
    args: dict[str, Any] = {"y": _Y, "window": _W4, "hop": 1}
    args.update(kw)
    y, w = up(args.pop("y")), up(args.pop("window"))
    with pytest.raises(exc, match=msg):
        ops_fft.rfft_frames(y, w, **args)
