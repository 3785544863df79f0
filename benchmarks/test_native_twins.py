"""Native CUDA twins against the Triton kernels, same op, same inputs, same run: rmsnorm,
softmax and silu_mul at 16384x8192 bf16 (also silu_mul on the two halves of a [16384, 16384]
projection), neox rope on x [4096, 32, 128] bf16 with float32 tables. The route is forced per
row (ROUTE semantics through gp.route); GB/s and %copy come from the copy ceiling measured in the
same run (the "copy 1 GiB" group, also measured here so this file runs on its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
M, N = 16384, 8192
T, H, D = 4096, 32, 128
ROUTES = ["native", "triton"]


def _bf16(*shape: int, seed: int = 0) -> gp.GPUArray:
    host = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return gp.from_numpy(host.astype(ml_dtypes.bfloat16), device="cuda:0")


def _need(family: str) -> None:
    from pygpukit.backends import native as native_kernels

    ok, why = native_kernels.status()
    if not ok:
        pytest.skip(why)
    fams = native_kernels.extension().families
    if family not in fams:
        pytest.skip(f"_pygpukit_native was built without the {family} family ({fams})")


def _run(
    bench: Any,
    backend: str,
    op: str,
    family: str,
    fn: Callable[[], Any],
    args: tuple[Any, ...],
    *,
    group: str,
    nbytes: int,
    **params: Any,
) -> None:
    if backend == "native":
        _need(family)
    with gp.route(f"{op}:{backend}"):
        got = gp.routing.explain(op, *args, **params).backend
        assert got == backend, gp.routing.explain(op, *args, **params)
        bench(fn, group=group, bytes=nbytes)


def test_twins_copy_ceiling(copy_ceiling: Callable[[], None]) -> None:
    copy_ceiling()


@pytest.mark.parametrize("backend", ROUTES)
def test_rmsnorm(bench: Any, backend: str) -> None:
    x, w = _bf16(M, N), _bf16(N, seed=1)
    out = gp.empty_like(x)
    _run(
        bench, backend, "rmsnorm", "norm", lambda: gp.rmsnorm(x, w, 1e-6, out=out), (x, w),
        group="twins rmsnorm 16384x8192 bf16", nbytes=2 * M * N * 2,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_softmax(bench: Any, backend: str) -> None:
    x = _bf16(M, N)
    out = gp.empty_like(x)
    _run(
        bench, backend, "softmax", "softmax", lambda: gp.softmax(x, out=out), (x,),
        group="twins softmax 16384x8192 bf16", nbytes=2 * M * N * 2, axis=-1,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_softmax_causal(bench: Any, backend: str) -> None:
    x = _bf16(M // N, N, N)  # two [8192 queries, 8192 keys] blocks: the square causal mask
    out = gp.empty_like(x)
    _run(
        bench, backend, "softmax", "softmax", lambda: gp.softmax(x, causal=True, out=out), (x,),
        group="twins softmax causal 2x8192x8192 bf16", nbytes=2 * M * N * 2, axis=-1,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_silu_mul(bench: Any, backend: str) -> None:
    g, u = _bf16(M, N), _bf16(M, N, seed=1)
    out = gp.empty_like(g)
    _run(
        bench, backend, "silu_mul", "activation", lambda: gp.silu_mul(g, u, out=out), (g, u),
        group="twins silu_mul 16384x8192 bf16", nbytes=3 * M * N * 2,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_silu_mul_halves(bench: Any, backend: str) -> None:
    gu = _bf16(M, 2 * N)
    g, u = gu[:, :N], gu[:, N:]  # row-strided views: read in place by both
    out = gp.empty((M, N), gp.bfloat16, device="cuda:0")
    _run(
        bench, backend, "silu_mul", "activation", lambda: gp.silu_mul(g, u, out=out), (g, u),
        group="twins silu_mul halves of 16384x16384 bf16", nbytes=3 * M * N * 2,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_rope(bench: Any, backend: str) -> None:
    x = _bf16(T, H, D)
    cos, sin = gp.rope_tables(T, D, device="cuda:0")
    out = gp.empty_like(x)
    _run(
        bench, backend, "rope", "rope", lambda: gp.rope(x, cos, sin, out=out), (x, cos, sin),
        group="twins rope T4096 H32 D128 bf16", nbytes=2 * T * H * D * 2, style="neox",
    )  # fmt: skip
