"""Native elementwise/unary/copy/reduce twins against the Triton kernels and torch eager, same op,
same inputs, same run, at 16384x8192 (bf16 unless noted): add (flat, and with a broadcast bias:
the strided N-d path), exp, cast bf16 -> float32, a transposed copy (contiguous() of x.T), sum
over the last axis (rows) and over the first (columns), a full float32 sum of 2**28 elements
(the split-K path) and argmax over rows. The route is forced per row (gp.route); GB/s and %copy
come from the "copy 1 GiB" group (benchmarks/test_copy.py, test_native_twins.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
M, N = 16384, 8192
ROUTES = ["native", "triton", "torch"]
BF = 2  # bytes per bf16


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


def _torch(x: gp.GPUArray) -> Any:
    torch = pytest.importorskip("torch")
    return torch.from_dlpack(x)


def _run(
    bench: Any,
    backend: str,
    ops: str,
    family: str,
    fn: Callable[[], Any],
    torch_fn: Callable[[], Any],
    *,
    group: str,
    nbytes: int,
) -> None:
    """ops: the routed ops fn calls (comma-separated), all forced to backend."""
    if backend == "torch":
        bench(torch_fn, group=group, bytes=nbytes)
        return
    if backend == "native":
        _need(family)
    with gp.route(",".join(f"{op}:{backend}" for op in ops.split(","))):
        bench(fn, group=group, bytes=nbytes)


@pytest.mark.parametrize("backend", ROUTES)
def test_add(bench: Any, backend: str) -> None:
    a, b = _bf16(M, N), _bf16(M, N, seed=1)
    out = gp.empty_like(a)
    ta, tb = (_torch(a), _torch(b)) if backend == "torch" else (None, None)
    _run(
        bench, backend, "add", "elementwise", lambda: gp.add(a, b, out=out),
        lambda: ta + tb, group="map add 16384x8192 bf16", nbytes=3 * M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_add_bias(bench: Any, backend: str) -> None:
    a, b = _bf16(M, N), _bf16(N, seed=1)
    out = gp.empty_like(a)
    ta, tb = (_torch(a), _torch(b)) if backend == "torch" else (None, None)
    _run(
        bench, backend, "add", "elementwise", lambda: gp.add(a, b, out=out),
        lambda: ta + tb, group="map add bias [16384x8192] + [8192] bf16", nbytes=2 * M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_exp(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    out = gp.empty_like(a)
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "exp", "unary", lambda: gp.exp(a, out=out), lambda: ta.exp(),
        group="map exp 16384x8192 bf16", nbytes=2 * M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_cast(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    out = gp.empty((M, N), gp.float32, device="cuda:0")
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "cast", "copy", lambda: gp.cast(a, gp.float32, out=out),
        lambda: ta.float(), group="map cast bf16->f32 16384x8192", nbytes=M * N * (BF + 4),
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_transpose_copy(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "copy", "copy", lambda: a.T.contiguous(), lambda: ta.t().contiguous(),
        group="map copy of x.T 16384x8192 bf16", nbytes=2 * M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_sum_rows(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    out = gp.empty((M,), gp.bfloat16, device="cuda:0")
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "sum", "reduce", lambda: gp.sum(a, -1, out=out), lambda: ta.sum(-1),
        group="reduce sum rows 16384x8192 bf16", nbytes=M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_sum_columns(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    out = gp.empty((N,), gp.bfloat16, device="cuda:0")
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "sum", "reduce", lambda: gp.sum(a, 0, out=out), lambda: ta.sum(0),
        group="reduce sum columns 16384x8192 bf16", nbytes=M * N * BF,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_sum_all_f32(bench: Any, backend: str) -> None:
    n = 1 << 28
    a = gp.from_numpy(np.random.default_rng(0).standard_normal(n, np.float32), device="cuda:0")
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "sum", "reduce", lambda: gp.sum(a), lambda: ta.sum(),
        group="reduce sum all 2**28 f32", nbytes=4 * n,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ROUTES)
def test_argmax_rows(bench: Any, backend: str) -> None:
    a = _bf16(M, N)
    ta = _torch(a) if backend == "torch" else None
    _run(
        bench, backend, "argmax", "reduce", lambda: gp.argmax(a, -1), lambda: ta.argmax(-1),
        group="reduce argmax rows 16384x8192 bf16", nbytes=M * N * BF,
    )  # fmt: skip
