"""Public ops.phase_project on the test device (ops._helpers.DEVICE, CPU by default) against a
float64 reference written from the definition: with and without the momentum term, complex64
and complex128, strided inputs, out=, zero bins and empty arrays, and bad input."""

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
    with pytest.raises(ValueError, match="magnitude must be float32 of z's shape"):
        ops.phase_project(z, up(np.ones((2, 4), np.float32)))
    with pytest.raises(ValueError, match="magnitude must be float32"):
        ops.phase_project(z, up(np.ones((2, 3), np.float64)))
    with pytest.raises(ValueError, match="prev must be complex64 of z's shape"):
        ops.phase_project(z, mag, up(np.ones((2, 3), np.complex128)))
    with pytest.raises(ValueError, match="prev_scale must be finite"):
        ops.phase_project(z, mag, z, prev_scale=float("nan"))
    with pytest.raises(ValueError, match="eps must be finite and >= 0"):
        ops.phase_project(z, mag, eps=-1.0)
    with pytest.raises(TypeError, match="prev_scale must be a float"):
        ops.phase_project(z, mag, z, prev_scale=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out"):
        ops.phase_project(z, mag, out=up(np.ones((3, 2), np.complex64)))
    # the runtime stays usable
    assert ops.phase_project(z, mag).shape == (2, 3)
