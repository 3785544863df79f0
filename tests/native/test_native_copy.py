"""Native twins of copy and cast on the GPU, through the public API with every route forced to
native: cast of every dtype pair bit-exact to the NumPy backend (NumPy + ml_dtypes: rounding,
fp8 overflow to NaN/inf, float64 -> bfloat16/fp8 through float32, x86 float -> int), strided
copies bit-exact in any layout (what contiguous(), copy() and setitem use on the GPU)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import copy as ncopy

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
ALL = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
       "int64", "int32", "int16", "int8", "uint8", "bool"]  # fmt: skip
INTS = {"int64", "int32", "int16", "int8", "uint8", "bool"}


@pytest.fixture(autouse=True)
def _native() -> Iterator[None]:
    with gp.route("*:native"):
        yield


def _npd(name: str) -> Any:
    return gp.as_dtype(name).np_dtype


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.array(x, order="C"), device=DEV)


def _source(dtype: str, size: int = 135) -> np.ndarray:
    """size values of dtype that exercise rounding, ties, overflow, NaN/inf and wrap-around."""
    rng = np.random.default_rng(len(dtype))
    special = [
        *(0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 200.0, -129.5, -3.7, 300.0, 464.0, 465.0, -465.0),
        *(448.0, 463.9, 57344.0, 61439.0, 61440.0, 70000.0, 65519.0, 65520.0, 3e9, -3e9),
        *(2.0**31, -(2.0**31), 2.0**31 - 64, 1e10, 1e19, -1e19, 2.0**63, -(2.0**63)),
        *(1e-8, 2.0**-24, 2.0**-25, 1e-40, np.nan, np.inf, -np.inf),
    ]
    v = np.concatenate([rng.standard_normal(size - len(special)) * 40, special])
    if dtype in INTS:
        with np.errstate(all="ignore"):
            iv = np.nan_to_num(v, posinf=7e8, neginf=-7e8).clip(-2e9, 2e9).astype(np.int64)
        # int -> float rounding (2**24 + 2**16 + 1 -> bfloat16 rounds twice, through float32)
        iv[:5] = [2**62 + 12345, -(2**62) - 7, 2**24 + 1, 2**53 + 1, 2**24 + 2**16 + 1]
        return iv.astype(_npd(dtype))
    src = v if dtype == "float64" else v.astype(np.float32)
    with np.errstate(all="ignore"):
        return src.astype(_npd(dtype))


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same(got: np.ndarray, ref: np.ndarray, what: str, nan_bits: bool = False) -> None:
    """Bit-equal; any NaN matches any NaN unless nan_bits (copies keep payloads)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    same = _bits(got) == _bits(ref)
    if got.dtype.kind not in "biu" and not nan_bits:
        with np.errstate(all="ignore"):
            same |= np.isnan(got.astype(np.float64)) & np.isnan(ref.astype(np.float64))
    bad = np.flatnonzero(~same)
    assert not bad.size, (
        f"{what}: {bad.size} differ, e.g. got {got.flat[bad[:4]]} ref {ref.flat[bad[:4]]}"
    )


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(ALL, ALL)), ids="-".join)
def test_cast_pairs(src: str, dst: str) -> None:
    x = _source(src)
    with np.errstate(all="ignore"):
        ref = cpu.cast(x, dtype=_npd(dst))
    r = gp.cast(up(x), dst)
    assert r.dtype is gp.as_dtype(dst)
    _same(r.to_numpy(), ref, f"{src}->{dst}")
    # strided source and out= (the N-d path)
    wide = np.zeros((2 * x.size,), x.dtype)
    wide[::2] = x
    out = gp.empty((2 * x.size,), dst, device=DEV)[::2]
    assert gp.cast(up(wide)[::2], dst, out=out) is out
    _same(out.to_numpy(), ref, f"{src}->{dst} strided")


def test_fp8_overflow_and_double_rounding() -> None:
    # float -> fp8 past the largest finite value: NaN (e4m3fn) / inf (e5m2), not saturation.
    x = np.array(
        [448.0, 463.9, 464.0, 464.1, 1e6, -1e6, np.inf, 57344.0, 61439.0, 61440.0], np.float32
    )
    for dst in ("float8_e4m3fn", "float8_e5m2"):
        _same(gp.cast(up(x), dst).to_numpy(), cpu.cast(x, dtype=_npd(dst)), dst)
    # float64 -> bfloat16/fp8 round through float32 (ml_dtypes); float64 -> float16 once.
    x = np.array([1 + 2**-8 + 2**-40, 1 + 2**-4 + 2**-40, 1 + 2**-11 + 2**-40], np.float64)
    for dst in ("bfloat16", "float8_e4m3fn", "float16"):
        _same(gp.cast(up(x), dst).to_numpy(), cpu.cast(x, dtype=_npd(dst)), dst)


@pytest.mark.parametrize("dtype", ALL)
def test_copy_layouts_bit_exact(dtype: str) -> None:
    x = _source(dtype, 7 * 33).reshape(7, 33)
    d = up(x)
    cases = (
        ("transposed", d.T, x.T),
        ("step", d[::2, ::3], x[::2, ::3]),
        ("offset", d[1:, 5:], x[1:, 5:]),
        ("broadcast", d[:1].broadcast_to((4, 7, 33)), np.broadcast_to(x[:1], (4, 7, 33))),
    )
    for name, src, ref in cases:
        for r in (src.contiguous(), src.copy(), ncopy.copy(src)):
            assert r.is_contiguous()
            _same(r.to_numpy(), np.ascontiguousarray(ref), f"{dtype} {name}", nan_bits=True)
    # setitem into a strided destination (the routed copy writes in place)
    base = gp.zeros((33, 14), dtype, device=DEV)
    base[:, ::2] = d.T
    host = base.to_numpy()
    _same(np.ascontiguousarray(host[:, ::2]), np.ascontiguousarray(x.T), dtype, nan_bits=True)
    assert not _bits(np.ascontiguousarray(host[:, 1::2])).any()  # gaps untouched
    assert ncopy.contiguous(d) is d


def test_large_and_unaligned() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2049, 4097)).astype(np.float32)
    d = up(x)
    _same(d.T.contiguous().to_numpy(), np.ascontiguousarray(x.T), "transpose", nan_bits=True)
    r = gp.cast(d, "bfloat16")
    _same(r.to_numpy(), cpu.cast(x, dtype=_npd("bfloat16")), "bf16")
    flat = up(np.concatenate([np.zeros(1, np.float32), x.reshape(-1)]))[1:]
    _same(flat.copy().to_numpy(), x.reshape(-1), "unaligned copy", nan_bits=True)
    _same(gp.cast(flat, "float16").to_numpy(), cpu.cast(x.reshape(-1), dtype=np.float16), "f16")


def test_empty_and_scalar_shapes() -> None:
    e = gp.empty((0, 5), gp.float32, device=DEV)
    assert gp.cast(e, "int32").shape == (0, 5)
    s = up(np.array(3.75, np.float32))
    assert gp.cast(s, "int32").to_numpy() == 3
    assert ncopy.copy(s).to_numpy() == np.float32(3.75)
    assert gp.routing.explain("cast", s).backend == "native"
