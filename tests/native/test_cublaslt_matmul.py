"""cuBLASLt matmul and linear on the GPU, against float64 NumPy references.

Bounds are docs/design.md's: fp32 1e-5 (exact fp32 is the default), tf32 only when asked, fp16 2e-3,
bf16 1e-2, fp64 1e-12. Inputs are drawn fresh per case; outputs are poisoned with NaN first.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from pygpukit import _core, precision, routing

pytestmark = pytest.mark.gpu
DEV = "cuda:0"


def up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device=DEV)


def t_view(x: np.ndarray) -> gp.GPUArray:
    return up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def strided(x: np.ndarray) -> gp.GPUArray:
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    wide[..., ::2] = x
    return up(wide)[..., ::2]


def padded_rows(x: np.ndarray) -> gp.GPUArray:
    wide = np.zeros((*x.shape[:-1], x.shape[-1] + 5), dtype=x.dtype)
    wide[..., : x.shape[-1]] = x
    return up(wide)[..., : x.shape[-1]]


def misaligned(x: np.ndarray) -> gp.GPUArray:
    """x's values starting one element past a pool block (2- or 4-byte aligned only)."""
    flat = np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)])
    return up(flat)[1:].reshape(x.shape)


def poisoned(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device=DEV)


def rel(out: gp.GPUArray, ref: np.ndarray) -> float:
    o = out.to_numpy().astype(np.float64)
    return float(np.linalg.norm(o - ref) / np.linalg.norm(ref))


@pytest.fixture(autouse=True)
def _exact(exact_fp32: None) -> Iterator[None]:
    yield


SHAPES = [(1, 1, 1), (1, 4097, 7), (7, 33, 1), (33, 7, 4097), (127, 257, 131), (4097, 33, 7)]


@pytest.mark.parametrize("mkn", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_matmul_odd_shapes(mkn: tuple[int, int, int], dtype: str) -> None:
    m, k, n = mkn
    rng = np.random.default_rng(seed("cublaslt", mkn, dtype))
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    out = poisoned((m, n), dtype)
    r = gp.matmul(up(a), up(b), out=out)
    assert r is out
    assert_close(out, as64(a) @ as64(b), dtype)


def test_routes_to_native() -> None:
    a = up(np.ones((4, 4), np.float32))
    e = routing.explain("matmul", a, a)
    assert e.backend == "native", str(e)
    routing.reset_stats()
    gp.matmul(a, a)
    gp.linear(a, a, a[0])
    assert routing.stats()["matmul"] == {"native": 1}
    assert routing.stats()["linear"] == {"native": 1}
    assert _core.cublaslt_loaded() is not None


def test_fp32_is_exact_by_default_and_tf32_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(11)
    a, b = rand(rng, (256, 1024), "float32"), rand(rng, (1024, 256), "float32")
    ref = as64(a) @ as64(b)
    ga, gb = up(a), up(b)
    exact = rel(gp.matmul(ga, gb), ref)
    assert exact <= 1e-5, exact
    gp.set_matmul_precision("tf32")
    tf32 = rel(gp.matmul(ga, gb), ref)
    # TF32 keeps 10 mantissa bits: on this input its error is far above the fp32 bound, which
    # is what proves the default above did not use it.
    assert 1e-5 < tf32 < 5e-3, tf32
    gp.set_matmul_precision("highest")
    assert rel(gp.matmul(ga, gb), ref) <= 1e-5
    monkeypatch.setenv("PYGPUKIT_ALLOW_TF32", "1")
    precision._explicit = None
    assert rel(gp.matmul(ga, gb), ref) > 1e-5
    monkeypatch.setenv("PYGPUKIT_NO_TF32", "1")
    assert rel(gp.matmul(ga, gb), ref) <= 1e-5


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((4, 1, 5, 33), (3, 33, 7)),
        ((2, 3, 17, 9), (9, 5)),
        ((9,), (2, 9, 4)),
        ((3, 7, 9), (9,)),
        ((2, 1, 3, 5), (1, 4, 5, 2)),
        ((5, 3), (6, 3, 2)),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_batched_and_broadcast(sa: tuple[int, ...], sb: tuple[int, ...], dtype: str) -> None:
    rng = np.random.default_rng(seed("batched", sa, sb, dtype))
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    ref = np.matmul(as64(a), as64(b))
    r = gp.matmul(up(a), up(b))
    assert r.shape == ref.shape
    assert_close(r, ref, dtype)


LAYOUTS = {
    "transposed": t_view,
    "strided": strided,
    "padded": padded_rows,
    "misaligned": misaligned,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_views(layout: str, dtype: str) -> None:
    rng = np.random.default_rng(seed("views", layout, dtype))
    a, b = rand(rng, (3, 37, 65), dtype), rand(rng, (3, 65, 19), dtype)
    f = LAYOUTS[layout]
    ref = np.matmul(as64(a), as64(b))
    assert_close(gp.matmul(f(a), f(b)), ref, dtype, name=f"{layout} both")
    assert_close(gp.matmul(up(a), f(b)), ref, dtype, name=f"{layout} b")
    assert_close(f(a[0]) @ up(b[0]), ref[0], dtype, name=f"{layout} a, 2-D, @")


def test_out_buffers() -> None:
    rng = np.random.default_rng(12)
    a, b = rand(rng, (2, 33, 17), "bfloat16"), rand(rng, (17, 9), "bfloat16")
    ref = np.matmul(as64(a), as64(b))
    wide = poisoned((2, 33, 18), "bfloat16")
    r = gp.matmul(up(a), up(b), out=wide[..., ::2])
    assert_close(r, ref, "bfloat16")
    assert np.isnan(wide.to_numpy()[..., 1::2].astype(np.float32)).all()  # untouched


def test_other_streams_and_mixed_dtypes() -> None:
    rng = np.random.default_rng(13)
    a, b = rand(rng, (64, 96), "float16"), rand(rng, (96, 40), "float32")
    ga, gb = up(a), up(b)
    s = gp.Stream(device=0)
    with gp.stream(s):
        r = gp.matmul(ga, gb)
    s.synchronize()
    assert r.dtype is gp.float32
    assert_close(r, as64(a) @ as64(b), "float32")


def _act(y: np.ndarray, act: str | None) -> np.ndarray:
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "silu":
        return y / (1 + np.exp(-y))
    if act == "gelu":
        return 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    if act == "gelu_tanh":
        return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))
    return y


@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh", "gelu", "silu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_linear(activation: str | None, dtype: str) -> None:
    rng = np.random.default_rng(seed("linear-gpu", activation, dtype))
    x, w, b = (
        rand(rng, (2, 7, 65), dtype),
        rand(rng, (33, 65), dtype, scale=0.3),
        rand(rng, 33, dtype),
    )
    out = poisoned((2, 7, 33), dtype)
    r = gp.linear(up(x), up(w), up(b), activation, out=out)
    assert r is out
    assert_close(out, _act(as64(x) @ as64(w).T + as64(b), activation), dtype)
    assert_close(gp.linear(up(x), t_view(w)), as64(x) @ as64(w).T, dtype)  # w rows strided
    assert_close(
        gp.linear(up(x[0]), up(w), activation=activation),
        _act(as64(x[0]) @ as64(w).T, activation),
        dtype,
    )


def test_linear_bias_of_another_dtype_and_fp64() -> None:
    rng = np.random.default_rng(14)
    x, w = rand(rng, (5, 40), "bfloat16"), rand(rng, (24, 40), "bfloat16", scale=0.3)
    b32 = rand(rng, 24, "float32")
    r = gp.linear(up(x), up(w), up(b32), "relu")
    assert r.dtype is gp.bfloat16  # x and w set the result dtype; the bias joins in fp32
    ref = np.maximum(as64(x) @ as64(w).T + as64(b32), 0)
    assert_close(r, ref, "bfloat16")
    x64, w64, b64 = (
        rand(rng, (5, 40), "float64"),
        rand(rng, (24, 40), "float64"),
        rand(rng, 24, "float64"),
    )
    for act in (None, "relu", "gelu_tanh"):
        r = gp.linear(up(x64), up(w64), up(b64), act)
        assert_close(r, _act(as64(x64) @ as64(w64).T + as64(b64), act), "float64")


def test_linear_bias_gelu_legacy_form() -> None:
    rng = np.random.default_rng(15)
    x, w, b = (
        rand(rng, (7, 129), "float16"),
        rand(rng, (33, 129), "float16", scale=0.2),
        rand(rng, 33, "float16"),
    )
    r = gp.linear_bias_gelu(up(x), up(w), up(b))
    assert r.dtype is gp.float16 and r.shape == (7, 33)
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu"), "float16")
    r = gp.linear_bias_gelu(up(x), up(w), up(b), approximate="tanh")
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu_tanh"), "float16")


def test_plans_are_cached() -> None:
    rng = np.random.default_rng(16)
    a, b = up(rand(rng, (48, 80), "bfloat16")), up(rand(rng, (80, 24), "bfloat16"))
    gp.matmul(a, b)
    n = _core.cublaslt_plan_count()
    for _ in range(3):
        gp.matmul(a, b)
    assert _core.cublaslt_plan_count() == n
    gp.matmul(b.T, a.T)  # a new problem (transposes, shape): one more plan
    assert _core.cublaslt_plan_count() == n + 1


def test_empty_and_k_zero() -> None:
    z = gp.matmul(up(np.ones((3, 0), np.float32)), up(np.ones((0, 2), np.float32)))
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((3, 2), np.float32))
    assert gp.matmul(up(np.ones((0, 4), np.float32)), up(np.ones((4, 3), np.float32))).shape == (
        0,
        3,
    )
