"""The Triton phase_project kernel (backends/triton_kernels/spectral.py) through the routed op
with the triton route forced, against the float64 definition: complex64 and complex128 (the
scalars passed as exact bit halves), with and without the momentum term, a strided z, a
strided out=, and an odd length (the last block masked)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import seed
from _tkutil import poisoned, up

import pygpukit as gp
from pygpukit import ops

_REAL = {"complex64": np.float32, "complex128": np.float64}


def pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("momentum", [None, 0.99])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_phase_project(device: str, dtype: str, momentum: float | None) -> None:
    rng = np.random.default_rng(seed("tk-phase-project", dtype, momentum))
    shape = (3, 1031)
    z = (rng.standard_normal((3, 2 * 1031)) + 1j * rng.standard_normal((3, 2 * 1031))).astype(dtype)
    prev = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    mag = np.abs(rng.standard_normal(shape)).astype(_REAL[dtype])
    z[0, :6] = 0
    c = 0.0 if momentum is None else momentum / (1 + momentum)
    eps = float(np.finfo(_REAL[dtype]).tiny)  # below float32's range for complex128's
    out = poisoned((3, 2 * 1031), getattr(gp, dtype), device)[:, ::2]
    with gp.route(phase_project="triton"):
        got = ops.phase_project(up(z, device)[:, ::2], up(mag, device),
                                None if momentum is None else up(prev, device), prev_scale=c,
                                eps=eps, out=out)  # fmt: skip
    assert got is out
    est = z[:, ::2].astype(np.complex128)
    if momentum is not None:
        est = est - c * prev.astype(np.complex128)
    want = est / (np.abs(est) + eps) * mag.astype(np.float64)
    bound = "float64" if dtype == "complex128" else "float32"
    assert_close(pairs(got.to_numpy()), pairs(want), bound, name=f"{dtype} {momentum}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("n", "hop"), [(64, 16), (48, 20), (8, 13)])
def test_overlap_add(device: str, dtype: str, n: int, hop: int) -> None:
    """Frames of a strided view (every other frame), window and envelope, a start inside the
    first frame and a length past the sum's end (zeros there), into a strided out=."""
    rng = np.random.default_rng(seed("tk-ola", dtype, n, hop))
    nf = 9
    frames = rng.standard_normal((3, 2 * nf, n)).astype(dtype)
    win = rng.standard_normal(n).astype(dtype)
    start = n // 3
    length = n + hop * (nf - 1) - start + 5
    env = rng.standard_normal(length).astype(dtype)
    out = poisoned((3, 2 * length), getattr(gp, dtype), device)[:, ::2]
    with gp.route(overlap_add="triton"):
        got = ops.overlap_add(up(frames, device)[:, ::2], hop, window=up(win, device),
                              envelope=up(env, device), start=start, length=length,
                              out=out)  # fmt: skip
    assert got is out
    want = np.zeros((3, length))
    fr = frames[:, ::2].astype(np.float64)
    for f in range(nf):
        lo, hi = f * hop - start, f * hop - start + n
        a, b = max(lo, 0), min(hi, length)
        if a < b:
            want[:, a:b] += fr[:, f, a - lo : b - lo] * win[a - lo : b - lo]
    want *= env
    assert_close(got.to_numpy(), want, dtype, name=f"ola {dtype} {n} {hop}")
