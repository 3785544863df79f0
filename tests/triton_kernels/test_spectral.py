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
