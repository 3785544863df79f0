"""Public ops.phase_project and ops.overlap_add on the test device (ops._helpers.DEVICE, CPU by
default) against float64 references written from the definitions: phase_project with and
without the momentum term, complex64 and complex128, strided inputs, out=, zero bins and empty
arrays; overlap_add with and without window and envelope, hops that divide the frame or not,
hop > n (gaps), start and length inside and past the sum, strided frames; and bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import seed

import pygpukit as gp
from ops._helpers import LAYOUTS, poisoned, up, view
from pygpukit import ops

_REAL = {"complex64": np.float32, "complex128": np.float64}


def pairs(z: Any) -> np.ndarray:
    z = z.to_numpy() if isinstance(z, gp.GPUArray) else np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1)


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return z.astype(dtype)


def reference(z: np.ndarray, mag: np.ndarray, prev: np.ndarray | None, c: float,
              eps: float) -> np.ndarray:  # fmt: skip
    """librosa.griffinlim's step in float64: est = z - c prev; est / (|est| + eps) * mag."""
    est = z.astype(np.complex128)
    if prev is not None:
        est = est - c * prev.astype(np.complex128)
    return est / (np.abs(est) + eps) * mag.astype(np.float64)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("momentum", [None, 0.99])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_matches_reference(dtype: str, momentum: float | None, layout: str) -> None:
    rng = np.random.default_rng(seed("phase-project", dtype, momentum, layout))
    shape = (3, 37, 65)
    z, prev = draw(rng, shape, dtype), draw(rng, shape, dtype)
    mag = np.abs(rng.standard_normal(shape)).astype(_REAL[dtype])
    z[0, 0, :5] = 0  # zero bins: est = 0 projects to 0 (eps keeps them finite)
    if momentum is not None:
        prev[0, 0, :5] = 0
    c = 0.0 if momentum is None else momentum / (1 + momentum)
    eps = float(np.finfo(_REAL[dtype]).tiny)
    got = ops.phase_project(view(z, layout), view(mag, layout),
                            None if momentum is None else view(prev, layout), prev_scale=c,
                            eps=eps)  # fmt: skip
    want = reference(z, mag, None if momentum is None else prev, c, eps)
    assert got.dtype.name == dtype and got.shape == shape
    assert np.all(np.isfinite(pairs(got)))
    bound = "float64" if dtype == "complex128" else "float32"
    assert_close(pairs(got), pairs(want), bound, name=f"{dtype} {momentum} {layout}")


def test_extreme_magnitudes() -> None:
    """|est|^2 of tiny and huge float32 values (1e-23, 3e19) neither underflows nor overflows:
    each bin comes back with the target magnitude and its own phase."""
    z = np.array([[1e-23 + 1e-23j, 3e19 - 3e19j, -2e-30j, 1 + 0j]], np.complex64)
    mag = np.ones((1, 4), np.float32)
    got = ops.phase_project(up(z), up(mag)).to_numpy()
    assert_close(pairs(got), pairs(z.astype(np.complex128) / np.abs(z.astype(np.complex128))),
                 "float32", name="extremes")  # fmt: skip


def test_out_and_empty() -> None:
    rng = np.random.default_rng(seed("phase-project-out"))
    z = draw(rng, (4, 9), "complex64")
    mag = np.abs(rng.standard_normal((4, 9))).astype(np.float32)
    out = poisoned((4, 18), gp.complex64)[:, ::2]
    got = ops.phase_project(up(z), up(mag), out=out, eps=1e-30)
    assert got is out
    assert_close(pairs(got), pairs(reference(z, mag, None, 0.0, 1e-30)), "float32", name="out")
    e = ops.phase_project(up(np.zeros((0, 3), np.complex64)), up(np.zeros((0, 3), np.float32)))
    assert e.shape == (0, 3)


def test_bad_input() -> None:
    z = up(np.ones((2, 3), np.complex64))
    mag = up(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="z must be complex64 or complex128"):
        ops.phase_project(mag, mag)
    with pytest.raises(ValueError, match="magnitude must have z's shape"):
        ops.phase_project(z, up(np.ones((2, 4), np.float32)))
    with pytest.raises(TypeError, match="magnitude must be float32"):
        ops.phase_project(z, up(np.ones((2, 3), np.float64)))
    with pytest.raises(TypeError, match="prev must be complex64"):
        ops.phase_project(z, mag, up(np.ones((2, 3), np.complex128)))
    with pytest.raises(ValueError, match="prev must have z's shape"):
        ops.phase_project(z, mag, up(np.ones((2, 4), np.complex64)))
    with pytest.raises(ValueError, match="prev_scale must be finite"):
        ops.phase_project(z, mag, z, prev_scale=float("nan"))
    with pytest.raises(ValueError, match="eps must be finite and >= 0"):
        ops.phase_project(z, mag, eps=-1.0)
    with pytest.raises(TypeError, match="prev_scale must be a float"):
        ops.phase_project(z, mag, z, prev_scale=True)  # type: ignore[arg-type]
    assert ops.phase_project(z, mag, z, prev_scale=np.float32(0.5)).shape == (2, 3)
    with pytest.raises(ValueError, match="out"):
        ops.phase_project(z, mag, out=up(np.ones((3, 2), np.complex64)))
    # the runtime stays usable
    assert ops.phase_project(z, mag).shape == (2, 3)


def ola_reference(frames: np.ndarray, hop: int, win: np.ndarray | None, env: np.ndarray | None,
                  start: int, length: int) -> np.ndarray:  # fmt: skip
    """Sample by sample from the definition, in float64."""
    b, nf, n = frames.shape
    y = np.zeros((b, length))
    for s in range(length):
        q = s + start
        for f in range(nf):
            j = q - f * hop
            if 0 <= j < n:
                y[:, s] += frames[:, f, j].astype(np.float64) * (1.0 if win is None else win[j])
        if env is not None:
            y[:, s] *= env[s]
    return y


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("nf", "n", "hop", "start", "length"),
    [(7, 16, 4, 8, None), (5, 16, 5, 0, 30), (4, 6, 9, 2, 40), (1, 8, 3, 0, None), (3, 8, 8, 3, 5)],
)
def test_overlap_add(dtype: str, nf: int, n: int, hop: int, start: int, length: int | None,
                     layout: str) -> None:  # fmt: skip
    rng = np.random.default_rng(seed("ola", dtype, nf, n, hop, start, length, layout))
    frames = rng.standard_normal((2, nf, n)).astype(dtype)
    win = rng.standard_normal(n).astype(dtype)
    total = n + hop * (nf - 1)
    ln = total - start if length is None else length
    env = rng.standard_normal(ln).astype(dtype)
    for w, e in ((None, None), (win, env), (win, None)):
        got = ops.overlap_add(view(frames, layout), hop, start=start, length=length,
                              window=None if w is None else up(w),
                              envelope=None if e is None else up(e))  # fmt: skip
        want = ola_reference(frames, hop, w, e, start, ln)
        assert got.shape == (2, ln) and got.dtype.name == dtype
        assert_close(got.to_numpy(), want, dtype, name=f"{nf} {n} {hop} {start} {length}")


def test_overlap_add_out_and_bad_input() -> None:
    frames = up(np.ones((2, 3, 4), np.float32))
    out = poisoned((2, 16), gp.float32)[:, ::2]
    got = ops.overlap_add(frames, 2, out=out)
    assert got is out
    want = np.array([1, 1, 2, 2, 2, 2, 1, 1], np.float32)
    np.testing.assert_array_equal(got.to_numpy(), np.stack([want, want]))
    with pytest.raises(ValueError, match="frames must be \\[batch, frames, n\\]"):
        ops.overlap_add(up(np.ones((3, 4), np.float32)), 2)
    with pytest.raises(TypeError, match="frames must be float32 or float64"):
        ops.overlap_add(up(np.ones((2, 3, 4), np.int32)), 2)
    with pytest.raises(ValueError, match="hop must be >= 1"):
        ops.overlap_add(frames, 0)
    with pytest.raises(ValueError, match="window must be \\[4\\]"):
        ops.overlap_add(frames, 2, window=up(np.ones(5, np.float32)))
    with pytest.raises(TypeError, match="window must be float32"):
        ops.overlap_add(frames, 2, window=up(np.ones(4, np.float64)))
    with pytest.raises(ValueError, match="envelope must be \\[8\\]"):
        ops.overlap_add(frames, 2, envelope=up(np.ones(7, np.float32)))
    # a start far past the frames: zeros, no buffer of the skipped span
    far = ops.overlap_add(frames, 2, start=10**12, length=3)
    np.testing.assert_array_equal(far.to_numpy(), np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="start must be an int"):
        ops.overlap_add(frames, 2, start=1.5)  # type: ignore[arg-type]
    assert ops.overlap_add(frames, 2).shape == (2, 8)
