"""The Triton fixed-tile GEMM (the deterministic mode's matmul, linear and linear_bias_gelu)
against float64 references, and its promise: a row's bits do not depend on the other rows or on
how the K chunks were scheduled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS, LAYOUTS, poisoned, up, view

from pygpukit.backends.triton_kernels import matmul as tm

ACTS = [None, "relu", "silu", "gelu", "gelu_tanh"]
# K: under one chunk, one chunk and a tail of one element, several chunks with a short tail.
SHAPES = [(1, 70, 100), (37, 65, 1025), (17, 16, 2100)]


def _ref_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, act: str | None) -> Any:
    y = as64(x) @ as64(w).T + (0.0 if b is None else as64(b))
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "silu":
        return y / (1.0 + np.exp(-y))
    if act == "gelu":
        from math import erf, sqrt

        return 0.5 * y * (1.0 + np.vectorize(erf)(y / sqrt(2.0)))
    if act == "gelu_tanh":
        u = np.sqrt(2.0 / np.pi) * (y + 0.044715 * y**3)
        return 0.5 * y * (1.0 + np.tanh(u))
    return y


@pytest.fixture(params=["split", "serial"])
def schedule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Chunks in programs of their own (partials + ordered add) or looped in one program."""
    monkeypatch.setattr(tm, "SPLIT_BELOW_TILES_PER_SM", 10**9 if request.param == "split" else 0)
    return str(request.param)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("mnk", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_linear(device: str, schedule: str, dtype: str, mnk: tuple, act: str | None) -> None:
    m, n, k = mnk
    rng = np.random.default_rng(seed("fixed-linear", dtype, mnk, act))
    x, w, b = rand(rng, (m, k), dtype), rand(rng, (n, k), dtype, scale=0.05), rand(rng, n, dtype)
    out = poisoned((m, n), dtype, device)
    y = tm.linear(up(x, device), up(w, device), up(b, device), activation=act, out=out)
    assert y is out
    assert_close(y, _ref_linear(x, w, b, act), dtype, name=f"{schedule} {act}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linear_layouts_and_batch_dims(device: str, layout: str) -> None:
    rng = np.random.default_rng(seed("fixed-layout", layout))
    x, w = rand(rng, (3, 5, 600), "float32"), rand(rng, (24, 600), "float32", scale=0.05)
    y = tm.linear(view(x, layout, device), view(w, layout, device))
    assert y.shape == (3, 5, 24)
    assert_close(y, _ref_linear(x, w, None, None), "float32", name=layout)


def test_empty_k_gives_the_epilogue_of_zero(device: str) -> None:
    rng = np.random.default_rng(1)
    b = rand(rng, 7, "float32")
    y = tm.linear(up(np.zeros((3, 0), np.float32), device), up(np.zeros((7, 0), np.float32),
                  device), up(b, device), activation="relu")  # fmt: skip
    np.testing.assert_array_equal(y.to_numpy(), np.broadcast_to(np.maximum(b, 0), (3, 7)))


def test_matmul_broadcast_batches(device: str) -> None:
    rng = np.random.default_rng(2)
    a, b = rand(rng, (2, 3, 5, 40), "float32"), rand(rng, (3, 40, 7), "float32")
    assert_close(tm.matmul(up(a, device), up(b, device)), as64(a) @ as64(b), "float32")
    v = rand(rng, 40, "float32")
    assert_close(tm.matmul(up(v, device), up(b, device)), as64(v) @ as64(b), "float32")
    assert_close(tm.matmul(up(a, device), up(v, device)), as64(a) @ as64(v), "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_rows_are_batch_invariant(device: str, dtype: str) -> None:
    """Each row alone, inside batches of 5 and 40 rows (beside other data), under both
    schedules: the same bits."""
    rng = np.random.default_rng(seed("fixed-invariant", dtype))
    k, n = 2100, 80
    w, b = up(rand(rng, (n, k), dtype, scale=0.05), device), up(rand(rng, n, dtype), device)
    rows = rand(rng, (40, k), dtype)
    outs = {}
    for sched, split_below in (("split", 10**9), ("serial", 0)):
        tm.SPLIT_BELOW_TILES_PER_SM, keep = split_below, tm.SPLIT_BELOW_TILES_PER_SM
        try:
            for m in (1, 5, 40):
                outs[sched, m] = tm.linear(up(rows[:m], device), w, b, activation="silu")
        finally:
            tm.SPLIT_BELOW_TILES_PER_SM = keep
    ref = outs["split", 1].to_numpy()[0]
    for key, y in outs.items():
        got = y.to_numpy()[0]
        assert got.tobytes() == ref.tobytes(), f"row 0 differs at {key}"
    mid = outs["serial", 40].to_numpy()[3]
    assert outs["split", 5].to_numpy()[3].tobytes() == mid.tobytes()
