"""Triton copy (any layout -> any layout) and cast (every dtype pair) against NumPy/ml_dtypes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import GPU, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels.copy import cast, contiguous, copy

ALL = [
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
]
# Triton's interpreter emulates bfloat16 and float8 conversions incorrectly (it truncates), so
# conversions to or from them run on the GPU only; moving their bits (copy) works everywhere.
INTERP_OK = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
INTS = {"int64", "int32", "int16", "int8", "uint8", "bool"}


def _npd(name: str) -> np.dtype:
    return gp.as_dtype(name).np_dtype


def _source(dtype: str, n: int = 97) -> np.ndarray:
    """Values of `dtype` that exercise rounding, ties, overflow, NaN/inf and wrap-around."""
    rng = np.random.default_rng(len(dtype))
    special = [
        *(0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 200.0, -129.5, -3.7, 300.0, 464.0, 465.0, -465.0),
        *(61439.0, 61440.0, 70000.0, 3e9, -3e9, 1e10, 1e19, np.nan, np.inf, -np.inf),
    ]
    v = np.concatenate([rng.standard_normal(n) * 40, special])
    if dtype in INTS:
        with np.errstate(all="ignore"):
            iv = np.nan_to_num(v, posinf=7e8, neginf=-7e8).clip(-2e9, 2e9).astype(np.int64)
        return iv.astype(_npd(dtype))
    src = v if dtype == "float64" else v.astype(np.float32)
    with np.errstate(all="ignore"):
        return src.astype(_npd(dtype))


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _assert_same(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    """Bit-equal, except that any NaN matches any NaN (payloads are not part of the contract)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    same = _bits(got) == _bits(ref)
    if got.dtype.kind not in "biu":
        with np.errstate(all="ignore"):
            same |= np.isnan(got.astype(np.float64)) & np.isnan(ref.astype(np.float64))
    bad = np.flatnonzero(~same)
    assert not bad.size, f"{what}: {bad.size} differ, e.g. got {got[bad[:4]]} ref {ref[bad[:4]]}"


def _pairs(ok: set[str]) -> list:
    out = []
    for s, d in itertools.product(ALL, ALL):
        marks = () if (s in ok and d in ok) else (GPU,)
        out.append(pytest.param(s, d, marks=marks, id=f"{s}-{d}"))
    return out


@pytest.mark.parametrize(("src", "dst"), _pairs(INTERP_OK))
def test_cast_pairs(device: str, src: str, dst: str) -> None:
    x = _source(src)
    r = cast(up(x, device), dtype=dst)
    assert r.dtype is gp.as_dtype(dst)
    with np.errstate(all="ignore"):
        ref = cpu.cast(x, dtype=_npd(dst))
    _assert_same(r.to_numpy(), ref, f"{src}->{dst}")


@GPU
def test_cast_fp8_overflow_and_double_rounding(device: str) -> None:
    # Triton saturates float -> fp8; the reference gives NaN (e4m3fn) / inf (e5m2).
    x = np.array(
        [448.0, 463.9, 464.0, 464.1, 1e6, -1e6, np.inf, 57344.0, 61439.0, 61440.0], np.float32
    )
    for dst in ("float8_e4m3fn", "float8_e5m2"):
        _assert_same(cast(up(x, device), dtype=dst).to_numpy(), cpu.cast(x, dtype=_npd(dst)), dst)
    # float64 -> bfloat16/fp8 round through float32 (ml_dtypes); float64 -> float16 once (NumPy).
    x = np.array([1 + 2**-8 + 2**-40, 1 + 2**-4 + 2**-40, 1 + 2**-11 + 2**-40], np.float64)
    for dst in ("bfloat16", "float8_e4m3fn", "float16"):
        _assert_same(cast(up(x, device), dtype=dst).to_numpy(), cpu.cast(x, dtype=_npd(dst)), dst)


@pytest.mark.parametrize("dtype", ALL)
def test_copy_layouts_bit_exact(device: str, dtype: str) -> None:
    x = _source(dtype, 7 * 33 - 23).reshape(7, 33)
    d = up(x, device)
    for name, src, ref in (
        ("transposed", d.T, x.T),
        ("step", d[::2, ::3], x[::2, ::3]),
        ("reversed-free", d[1:, 5:], x[1:, 5:]),
        ("broadcast", d[:1].broadcast_to((4, 7, 33)), np.broadcast_to(x[:1], (4, 7, 33))),
    ):
        r = copy(src)
        assert r.is_contiguous()
        _assert_same(r.to_numpy(), np.ascontiguousarray(ref), f"{dtype} {name}")
    out = poisoned_strided(x.T.shape, dtype, device)
    assert copy(d.T, out=out) is out
    _assert_same(out.to_numpy(), np.ascontiguousarray(x.T), f"{dtype} strided out")
    assert contiguous(d) is d


def test_cast_layouts_and_out(device: str) -> None:
    x = _source("float32", 7 * 33 - 23).reshape(7, 33)
    out = poisoned((33, 7), "int16", device)
    assert cast(up(x, device).T, dtype="int16", out=out) is out
    _assert_same(out.to_numpy(), cpu.cast(np.ascontiguousarray(x.T), dtype=np.int16), "T")
    r = cast(up(x, device)[:, ::2], dtype=gp.float64)
    _assert_same(r.to_numpy(), x[:, ::2].astype(np.float64), "step")
    r = cast(up(x, device), dtype="float32")  # same dtype: a copy
    _assert_same(r.to_numpy(), x, "same")


def test_empty_and_scalar_shapes(device: str) -> None:
    e = gp.empty((0, 5), gp.float32, device=device)
    assert cast(e, dtype="int32").shape == (0, 5)
    s = up(np.array(3.75, np.float32), device)
    assert cast(s, dtype="int32").to_numpy() == 3
    assert copy(s).to_numpy() == np.float32(3.75)
