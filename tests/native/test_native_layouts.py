"""The native backend's mapping of arrays onto cuBLASLt calls, checked on any machine.

pygpukit/backends/native/matmul.py turns a matmul or linear call into one or more
``_core.cublaslt_matmul`` calls: row-major problems with transposes, leading dims, batch strides
(0 = broadcast), a batch folded into M, loops over outer batch dims, epilogues. Here that call
is replaced by a NumPy emulation of its documented contract (pygpukit_core::blas::Gemm), reading
and writing host memory of CPU-device arrays, and also enforcing the Rust validation rules. The
results must match a float64 reference for every layout the backend reads in place, so the
layout logic is proven without a GPU; the GPU tests (test_cublaslt_matmul.py) then prove the
Rust side's mapping onto cuBLASLt with the same kinds of inputs.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, np_dtype, rand, seed

import pygpukit as gp
from pygpukit.backends.native import matmul as native
from pygpukit.ops._epilogue import finish


class Calls(list):  # type: ignore[type-arg]
    pass


def _host(ptr: int, dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(ptr)
    flat = np.frombuffer(buf, dtype=dtype)
    return np.lib.stride_tricks.as_strided(
        flat, shape, tuple(s * dtype.itemsize for s in strides), writeable=True
    )


def _fake_matmul(calls: Calls) -> Any:
    def fake(
        device: int,
        stream: int,
        dtype: str,
        m: int,
        n: int,
        k: int,
        batch: int,
        a: int,
        a_trans: bool,
        lda: int,
        stride_a: int,
        b: int,
        b_trans: bool,
        ldb: int,
        stride_b: int,
        d: int,
        ldd: int,
        stride_d: int,
        epilogue: str = "none",
        bias: int = 0,
        tf32: bool = False,
        workspace: int = 0,
        workspace_size: int = 0,
    ) -> None:
        # pygpukit_core::blas::validate
        assert min(m, n, k, batch) >= 1
        assert lda >= (m if a_trans else k) and ldb >= (k if b_trans else n) and ldd >= n
        assert min(stride_a, stride_b, stride_d) >= 0
        assert batch == 1 or stride_d >= m * ldd
        assert workspace != 0 and workspace_size == native.WORKSPACE_BYTES
        assert not tf32 or dtype == "float32"
        calls.append(
            dict(m=m, n=n, k=k, batch=batch, a_trans=a_trans, b_trans=b_trans, epi=epilogue)
        )
        dt = np_dtype(dtype)
        av = _host(a, dt, (batch, m, k), (stride_a, 1, lda) if a_trans else (stride_a, lda, 1))
        bv = _host(b, dt, (batch, k, n), (stride_b, 1, ldb) if b_trans else (stride_b, ldb, 1))
        dv = _host(d, dt, (batch, m, n), (stride_d, ldd, 1))
        ct = np.float64 if dtype == "float64" else np.float32
        y = np.matmul(av.astype(ct), bv.astype(ct))
        if epilogue.endswith("bias") and epilogue != "none":
            y = y + _host(bias, dt, (n,), (1,)).astype(ct)
        if epilogue.startswith("relu"):
            y = np.maximum(y, 0)
        if epilogue.startswith("gelu_tanh"):
            y = 0.5 * y * (1 + np.tanh(ct(math.sqrt(2 / math.pi)) * (y + ct(0.044715) * y**3)))
        dv[...] = y.astype(dt)

    return fake


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    got = Calls()
    monkeypatch.setattr(native._core, "cublaslt_matmul", _fake_matmul(got))
    yield got


def up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cpu")


def t_view(x: np.ndarray) -> gp.GPUArray:
    """x's values as a transposed view of a buffer holding x^T (inner two dims)."""
    return up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def strided(x: np.ndarray) -> gp.GPUArray:
    """x's values with every other element of the last dim (nothing cuBLASLt reads in place)."""
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    wide[..., ::2] = x
    return up(wide)[..., ::2]


def padded_rows(x: np.ndarray) -> gp.GPUArray:
    """Rows contiguous but with a leading dim larger than the row (a column slice)."""
    wide = np.zeros((*x.shape[:-1], x.shape[-1] + 3), dtype=x.dtype)
    wide[..., : x.shape[-1]] = x
    return up(wide)[..., : x.shape[-1]]


def ref_mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(as64(a), as64(b))


LAYOUTS = {"contiguous": up, "transposed": t_view, "padded": padded_rows, "strided": strided}


@pytest.mark.parametrize("la", list(LAYOUTS))
@pytest.mark.parametrize("lb", list(LAYOUTS))
def test_2d_layouts_read_in_place(calls: Calls, la: str, lb: str) -> None:
    rng = np.random.default_rng(seed("layouts", la, lb))
    a, b = rand(rng, (7, 33), "float32"), rand(rng, (33, 13), "float32")
    r = native.matmul(LAYOUTS[la](a), LAYOUTS[lb](b))
    assert_close(r, ref_mm(a, b), "float32")
    assert len(calls) == 1
    # A transposed view becomes a cuBLASLt transpose; a strided one is copied (contiguous).
    assert calls[0]["a_trans"] == (la == "transposed")
    assert calls[0]["b_trans"] == (lb == "transposed")


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((1, 7), (7, 1)),
        ((7,), (7, 5)),
        ((3, 7), (7,)),
        ((7,), (7,)),
        ((4, 3, 5), (5, 2)),  # folds into one [12, 5] @ [5, 2]
        ((4, 1, 5), (5, 2)),  # M = 1 batch folds too
        ((5, 2), (3, 2, 4)),  # left operand broadcast: stride 0
        ((2, 1, 3, 5), (1, 4, 5, 2)),  # batch dims not one stride: loops over the first
        ((2, 3, 4, 5), (3, 5, 2)),
        ((1, 1), (1, 1)),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_shapes_vectors_and_broadcasting(
    calls: Calls, sa: tuple[int, ...], sb: tuple[int, ...], dtype: str
) -> None:
    rng = np.random.default_rng(seed("shapes", sa, sb, dtype))
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    r = native.matmul(up(a), up(b))
    ref = ref_mm(a, b)
    assert r.shape == ref.shape
    assert_close(r, ref, dtype)
    if sa == (4, 3, 5):
        assert calls[0]["m"] == 12 and calls[0]["batch"] == 1
    if sa == (2, 1, 3, 5):
        assert len(calls) == 2 and calls[0]["batch"] == 4


def test_batched_transposed_views_and_out(calls: Calls) -> None:
    rng = np.random.default_rng(5)
    a, b = rand(rng, (3, 6, 9), "float16"), rand(rng, (3, 9, 4), "float16")
    out = gp.full((3, 6, 4), float("nan"), dtype="float16", device="cpu")
    r = native.matmul(t_view(a), t_view(b), out=out)
    assert r is out
    assert_close(out, ref_mm(a, b), "float16")
    assert calls[0]["batch"] == 3 and calls[0]["a_trans"] and calls[0]["b_trans"]
    # A non-contiguous out= gets a temporary, then a copy.
    wide = gp.full((3, 6, 8), float("nan"), dtype="float16", device="cpu")
    r = native.matmul(up(a), up(b), out=wide[..., ::2])
    assert_close(r, ref_mm(a, b), "float16")


def test_mixed_dtypes_cast_to_the_result(calls: Calls) -> None:
    rng = np.random.default_rng(6)
    a, b = rand(rng, (5, 8), "float16"), rand(rng, (8, 3), "float32")
    r = native.matmul(up(a), up(b), out_dtype=np.float32)
    assert r.dtype is gp.float32
    assert_close(r, ref_mm(a, b), "float32")


def test_empty_and_k_zero(calls: Calls) -> None:
    a, b = up(np.ones((0, 4), np.float32)), up(np.ones((4, 3), np.float32))
    assert native.matmul(a, b).shape == (0, 3)
    z = native.matmul(up(np.ones((3, 0), np.float32)), up(np.ones((0, 2), np.float32)))
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((3, 2), np.float32))
    assert calls == []


def _done(fn: Any, *args: Any, out: gp.GPUArray | None = None, **kw: Any) -> Any:
    """A native product with what it leaves Unfinished completed, as gp.linear does."""
    return finish(fn(*args, out=out, **kw), out)


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
@pytest.mark.parametrize("bias_dtype", [None, "same", "float32"])
def test_linear_epilogues(calls: Calls, activation: str | None, bias_dtype: str | None) -> None:
    dtype = "bfloat16"
    rng = np.random.default_rng(seed("linear", activation, bias_dtype))
    x, w = rand(rng, (2, 5, 24), dtype), rand(rng, (9, 24), dtype, scale=0.3)
    bias = (
        None if bias_dtype is None else rand(rng, 9, dtype if bias_dtype == "same" else bias_dtype)
    )
    out = gp.full((2, 5, 9), float("nan"), dtype=dtype, device="cpu")
    r = _done(
        native.linear,
        up(x),
        up(w),
        None if bias is None else up(bias),
        activation=activation,
        out=out,
    )
    assert r is out
    y = as64(x) @ as64(w).T + (0 if bias is None else as64(bias))
    assert_close(out, _act(y, activation), dtype)
    # One GEMM of [10, 24] @ w.T (the batch folded into M, the weight read transposed).
    assert len(calls) == 1 and calls[0]["m"] == 10 and calls[0]["b_trans"]
    fused_bias = bias_dtype == "same"
    want = {None: "", "relu": "relu", "gelu_tanh": "gelu_tanh"}.get(activation, "")
    epi = (f"{want}_bias" if want else "bias") if fused_bias else (want or "none")
    if activation in ("gelu", "silu"):  # erf-GELU and SiLU are not cuBLASLt epilogues
        epi = "bias" if fused_bias else "none"
    if bias_dtype == "float32" and activation in ("relu", "gelu_tanh"):
        epi = "none"  # the fp32 bias is left to the routed add, then the activation
    assert calls[0]["epi"] == epi


def test_linear_bias_gelu_maps_to_linear(calls: Calls) -> None:
    rng = np.random.default_rng(8)
    x, w, b = rand(rng, (4, 16), "float32"), rand(rng, (6, 16), "float32"), rand(rng, 6, "float32")
    r = _done(native.linear_bias_gelu, up(x), up(w), up(b), approximate="tanh")
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu_tanh"), "float32")
    assert calls[-1]["epi"] == "gelu_tanh_bias"
    r = _done(native.linear_bias_gelu, up(x), up(w), up(b))
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu"), "float32")
    assert calls[-1]["epi"] == "bias"


def test_fp64_gelu_is_not_fused(calls: Calls) -> None:
    rng = np.random.default_rng(10)
    x, w, b = rand(rng, (3, 8), "float64"), rand(rng, (5, 8), "float64"), rand(rng, 5, "float64")
    r = _done(native.linear, up(x), up(w), up(b), activation="gelu_tanh")
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "gelu_tanh"), "float64")
    assert calls[-1]["epi"] == "bias"
    _done(native.linear, up(x), up(w), up(b), activation="relu")
    assert calls[-1]["epi"] == "relu_bias"


def test_unsupported_epilogue_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    got = Calls()
    inner = _fake_matmul(got)

    class NotSupported(gp.CudaError):  # type: ignore[misc]
        name = "CUBLAS_STATUS_NOT_SUPPORTED"

    def picky(*args: Any, **kw: Any) -> None:
        if kw.get("epilogue", args[18] if len(args) > 18 else "none") != "none":
            raise NotSupported("no algorithm")
        inner(*args, **kw)

    monkeypatch.setattr(native._core, "cublaslt_matmul", picky)
    monkeypatch.setattr(native, "_unsupported", set())
    rng = np.random.default_rng(9)
    x, w, b = rand(rng, (3, 8), "float64"), rand(rng, (5, 8), "float64"), rand(rng, 5, "float64")
    r = _done(native.linear, up(x), up(w), up(b), activation="relu")
    assert_close(r, _act(as64(x) @ as64(w).T + as64(b), "relu"), "float64")
    assert ("float64", "relu_bias") in native._unsupported
