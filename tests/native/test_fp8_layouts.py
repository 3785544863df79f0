"""The native matmul_fp8's host side without a GPU: pygpukit/backends/native/matmul_fp8.py run on
CPU-device arrays with cuBLASLt replaced by a NumPy model of cublasLtMatmul that reads the
addresses it is given in cuBLASLt's layouts (rust/pygpukit-core/src/blas/fp8.rs docs) and
asserts the Rust core's requirements (K % 16, N % 16, M % 4 under block scaling, 16-byte
aligned operands, rows and output).

This checks the mode pairing, padding, scale re-layouts and copy-back against that model; the
GPU tests (test_fp8_matmul.py) check the model against cuBLASLt itself.
"""

from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import seed

import pygpukit as gp
from pygpukit import _core
from pygpukit.backends.native import matmul_fp8 as native_fp8
from pygpukit.ops._epilogue import finish

FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _mem(ptr: int, count: int, dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    buf = (ctypes.c_uint8 * (count * dt.itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype=dt)


def _scales(ptr: int, mode: str, rows: int, k: int) -> np.ndarray:
    """The [rows, k] multiplier cuBLASLt reads at ``ptr`` for ``mode``."""
    nk = _cdiv(k, 128)
    if mode == "tensor":
        return np.full((rows, k), _mem(ptr, 1, np.float32)[0], np.float64)
    if mode == "outer":
        return np.repeat(_mem(ptr, rows, np.float32).astype(np.float64)[:, None], k, 1)
    if mode == "block1x128":  # [nk, rows], rows contiguous
        s = _mem(ptr, nk * rows, np.float32).reshape(nk, rows).T
        return np.repeat(s.astype(np.float64), 128, 1)[:, :k]
    nk4 = _cdiv(nk, 4) * 4  # block128x128: [ceil(rows/128), nk4], K blocks contiguous
    s = _mem(ptr, _cdiv(rows, 128) * nk4, np.float32).reshape(-1, nk4)[:, :nk]
    return np.repeat(np.repeat(s.astype(np.float64), 128, 0), 128, 1)[:rows, :k]


calls: list[dict] = []


def _fake_matmul_fp8(
    device: int, stream: int, m: int, n: int, k: int,
    a: int, a_type: str, lda: int, scale_a: int, mode_a: str,
    b: int, b_type: str, ldb: int, scale_b: int, mode_b: str,
    d: int, out_dtype: str, ldd: int, bias: int = 0, fast_accum: bool = False,
    workspace: int = 0, workspace_size: int = 0,
) -> None:  # fmt: skip
    assert k % 16 == 0 and n % 16 == 0 and lda % 16 == 0 and ldb % 16 == 0
    assert (mode_a, mode_b) in {
        ("tensor", "tensor"),
        ("outer", "outer"),
        ("block1x128", "block128x128"),
        ("block1x128", "block1x128"),
    }, (mode_a, mode_b)
    if "block" in mode_a:
        assert m % 4 == 0 and not fast_accum
    assert a % 16 == 0 and b % 16 == 0 and d % 16 == 0
    assert (ldd * np.dtype(NP[out_dtype]).itemsize) % 16 == 0 and ldd >= n
    if mode_a != "tensor":
        assert scale_a % 16 == 0 and scale_b % 16 == 0
    av = _mem(a, m * lda, FP8[a_type]).reshape(m, lda)[:, :k].astype(np.float64)
    bv = _mem(b, n * ldb, FP8[b_type]).reshape(n, ldb)[:, :k].astype(np.float64)
    y = (av * _scales(scale_a, mode_a, m, k)) @ (bv * _scales(scale_b, mode_b, n, k)).T
    if bias:
        assert out_dtype != "float32" and bias % 16 == 0
        y = y + _mem(bias, n, NP[out_dtype]).astype(np.float64)
    out = _mem(d, m * ldd, NP[out_dtype]).reshape(m, ldd)
    out[:, :n] = y.astype(NP[out_dtype])
    calls.append(dict(m=m, n=n, modes=(mode_a, mode_b), bias=bool(bias)))


class _Ws:
    ptr = 0


@pytest.fixture(autouse=True)
def fake_cublaslt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_core, "cublaslt_matmul_fp8", _fake_matmul_fp8, raising=False)
    monkeypatch.setattr(native_fp8, "stream_buffer", lambda dev, name, nbytes: _Ws())
    calls.clear()


def _fp8(*args: Any, out: gp.GPUArray | None = None, **kw: Any) -> gp.GPUArray:
    """The native matmul_fp8 with what it leaves Unfinished completed, as gp.matmul_fp8 does."""
    return finish(native_fp8.matmul_fp8(*args, out=out, **kw), out)


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cpu")


SHAPES = {
    "tensor": lambda r, k: (1,),
    "row": lambda r, k: (r, 1),
    "block1x128": lambda r, k: (r, _cdiv(k, 128)),
    "block128x128": lambda r, k: (_cdiv(r, 128), _cdiv(k, 128)),
}
GROUPS = {
    "tensor": lambda r, k: (r, k),
    "row": lambda r, k: (1, k),
    "block1x128": lambda r, k: (1, 128),
    "block128x128": lambda r, k: (128, 128),
}
PAIRS = [
    ("tensor", "tensor", ("tensor", "tensor")),
    ("row", "row", ("outer", "outer")),
    ("tensor", "row", ("outer", "outer")),
    ("row", "tensor", ("outer", "outer")),
    ("block1x128", "block128x128", ("block1x128", "block128x128")),
    ("block1x128", "block1x128", ("block1x128", "block1x128")),
    ("tensor", "block128x128", ("block1x128", "block128x128")),
    ("row", "block1x128", ("block1x128", "block1x128")),
    ("block1x128", "tensor", ("block1x128", "block128x128")),
    ("block1x128", "row", ("block1x128", "block1x128")),
]


def _expected(ka: str, kb: str, m: int, modes: tuple) -> tuple:
    """The pair's modes, except that one activation row makes per-row scales per-tensor (the
    shapes here all have K > 128 and N > 1, so nothing else collapses)."""
    if m == 1 and ka == "row":
        return ("tensor", "tensor") if kb == "tensor" else modes
    return modes


@pytest.mark.parametrize(("ka", "kb", "modes"), PAIRS)
@pytest.mark.parametrize(("m", "n", "k"), [(7, 33, 272), (8, 48, 512), (1, 130, 16 * 41)])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_pairs_padding_and_layouts(
    ka: str, kb: str, modes: tuple, m: int, n: int, k: int, out_dtype: str
) -> None:
    rng = np.random.default_rng(seed("emu", ka, kb, m, n, k, out_dtype))
    a = (rng.standard_normal((m, k)) * 4).astype(np.float32).astype(FP8["float8_e4m3fn"])
    b = (rng.standard_normal((n, k)) * 4).astype(np.float32).astype(FP8["float8_e5m2"])
    sa = (rng.random(SHAPES[ka](m, k)) + 0.1).astype(np.float32)
    sb = (rng.random(SHAPES[kb](n, k)) + 0.1).astype(np.float32)
    bias = rng.standard_normal(n).astype(NP[out_dtype])
    groups = (GROUPS[ka](m, k), GROUPS[kb](n, k))
    from pygpukit.backends import cpu

    for with_bias in (False, True):
        bb = bias if with_bias else None
        ref = cpu.matmul_fp8(a, b, sa, sb, bb, out_dtype=NP[out_dtype], groups=groups)
        out = gp.full((m, n), float("nan"), dtype=out_dtype, device="cpu")
        r = _fp8(
            up(a), up(b), up(sa), up(sb), None if bb is None else up(bb),
            out=out, out_dtype=out_dtype, groups=groups,
        )  # fmt: skip
        assert r is out
        assert_close(r, ref, out_dtype)
        assert calls[-1]["modes"] == _expected(ka, kb, m, modes)
        assert calls[-1]["n"] == -(-n // 16) * 16
        assert calls[-1]["m"] == (-(-m // 4) * 4 if "block" in calls[-1]["modes"][0] else m)
        # Bias: fused for half results; float32 results get it from the add op.
        assert calls[-1]["bias"] == (with_bias and out_dtype != "float32")


def test_strided_operands_scales_and_out() -> None:
    rng = np.random.default_rng(3)
    m, n, k = 12, 64, 384
    a = (rng.standard_normal((m, k)) * 4).astype(np.float32).astype(FP8["float8_e4m3fn"])
    b = (rng.standard_normal((n, k)) * 4).astype(np.float32).astype(FP8["float8_e4m3fn"])
    sa = (rng.random((m, 3)) + 0.1).astype(np.float32)
    sb = (rng.random((1, 3)) + 0.1).astype(np.float32)
    groups = ((1, 128), (128, 128))
    from pygpukit.backends import cpu

    ref = cpu.matmul_fp8(a, b, sa, sb, out_dtype=np.float32, groups=groups)
    a_wide = np.zeros((m, k + 16), a.dtype)
    a_wide[:, :k] = a
    b_t = up(b.T.copy()).T  # K-minor: must be copied to K-major
    sa_t = up(sa.T.copy()).T  # already cuBLASLt's order: used in place
    wide = gp.full((m, 2 * n), float("nan"), dtype="float32", device="cpu")
    out = wide[:, ::2]
    r = _fp8(up(a_wide)[:, :k], b_t, sa_t, up(sb), out=out, out_dtype="float32", groups=groups)
    assert r is out
    assert_close(r, ref, "float32")


def test_empty_results_call_nothing() -> None:
    a = up(np.zeros((0, 32), FP8["float8_e4m3fn"]))
    b = up(np.zeros((16, 32), FP8["float8_e4m3fn"]))
    one = up(np.float32([1.0]))
    r = _fp8(a, b, one, one, out_dtype="bfloat16", groups=((1, 32), (16, 32)))
    assert r.shape == (0, 16) and not calls


def test_bias_falls_back_to_an_unfused_float32_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused bias cuBLASLt rejects (NOT_SUPPORTED) is remembered and computed as a float32
    product plus bias, rounded once: the same numerics."""

    def reject_bias(*args: Any, **kw: Any) -> None:
        if args[18]:
            err = _core.CudaError("cublasLtMatmulAlgoGetHeuristic failed")
            err.name = "CUBLAS_STATUS_NOT_SUPPORTED"
            raise err
        _fake_matmul_fp8(*args, **kw)

    monkeypatch.setattr(_core, "cublaslt_matmul_fp8", reject_bias)
    monkeypatch.setattr(native_fp8, "_unfused_bias", set())
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((8, 256)) * 4).astype(np.float32).astype(FP8["float8_e4m3fn"])
    b = (rng.standard_normal((32, 256)) * 4).astype(np.float32).astype(FP8["float8_e4m3fn"])
    sa, sb = np.float32([0.5]), (rng.random(32) + 0.1).astype(np.float32)
    bias = rng.standard_normal(32).astype(ml_dtypes.bfloat16)
    groups = ((8, 256), (1, 256))
    from pygpukit.backends import cpu

    ref = cpu.matmul_fp8(a, b, sa, sb, bias, out_dtype=ml_dtypes.bfloat16, groups=groups)
    for _ in range(2):
        r = _fp8(up(a), up(b), up(sa), up(sb), up(bias), out_dtype="bfloat16", groups=groups)
        assert_close(r, ref, "bfloat16")
    assert len(native_fp8._unfused_bias) == 1
    assert [c["bias"] for c in calls] == [False, False]
