"""dtype names, NumPy mapping and the promotion rules documented in pygpukit/dtypes.py."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp
from pygpukit.dtypes import ALL_DTYPES, as_dtype, result_type


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: d.name)
def test_resolves_by_every_name(dt: gp.DataType) -> None:
    assert as_dtype(dt.name) is dt
    assert as_dtype(dt) is dt
    assert as_dtype(str(dt)) is dt
    assert as_dtype(dt.np_dtype) is dt


def test_aliases_and_strings() -> None:
    assert as_dtype("bf16") is gp.bfloat16
    assert as_dtype("fp16") is gp.float16
    assert as_dtype(np.float32) is gp.float32
    assert as_dtype(ml_dtypes.bfloat16) is gp.bfloat16
    assert str(gp.bfloat16).split(".")[-1] == "bfloat16"  # Triton's canonicalisation key


def test_unknown_dtype_names_the_input() -> None:
    with pytest.raises(TypeError, match="unknown dtype 'floaty'"):
        as_dtype("floaty")
    with pytest.raises(TypeError, match="complex256"):
        as_dtype(np.dtype("complex256"))  # no pygpukit equivalent


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (gp.int32, gp.float16, gp.float16),
        (gp.bool_, gp.int8, gp.int8),
        (gp.uint8, gp.int8, gp.int16),
        (gp.uint8, gp.int16, gp.int16),
        (gp.int64, gp.int32, gp.int64),
        (gp.float16, gp.bfloat16, gp.float32),
        (gp.bfloat16, gp.float32, gp.float32),
        (gp.float32, gp.float64, gp.float64),
        (gp.int64, gp.float16, gp.float16),
    ],
)
def test_array_array_promotion(a: gp.DataType, b: gp.DataType, want: gp.DataType) -> None:
    assert result_type(np.empty(1, a.np_dtype), np.empty(1, b.np_dtype)) is want
    assert result_type(np.empty(1, b.np_dtype), np.empty(1, a.np_dtype)) is want


def test_promotion_is_symmetric_and_matches_numpy_where_numpy_has_the_types() -> None:
    numeric = [d for d in ALL_DTYPES if d.kind in "biuf" and d is not gp.bfloat16]
    for a, b in itertools.product(numeric, numeric):
        got = result_type(np.empty(1, a.np_dtype), np.empty(1, b.np_dtype))
        assert got is result_type(np.empty(1, b.np_dtype), np.empty(1, a.np_dtype))
        want = np.result_type(a.np_dtype, b.np_dtype)
        if a.kind != b.kind and "f" in (a.kind, b.kind):
            # Documented difference: int with float keeps the float dtype (torch rule), where
            # NumPy widens (int32 + float16 -> float64).
            assert got.kind == "f"
        else:
            assert got.np_dtype == want, (a, b)


@pytest.mark.parametrize(
    ("arr", "scalar", "want"),
    [
        (gp.float16, 2.5, gp.float16),
        (gp.bfloat16, 3, gp.bfloat16),
        (gp.int32, 2.5, gp.float32),
        (gp.int8, 3, gp.int8),
        (gp.bool_, 1, gp.int64),
        (gp.bool_, 1.0, gp.float32),
        (gp.uint8, True, gp.uint8),
    ],
)
def test_weak_scalars(arr: gp.DataType, scalar: object, want: gp.DataType) -> None:
    a = np.empty(1, arr.np_dtype)
    assert result_type(a, scalar) is want
    assert result_type(scalar, a) is want


def test_scalar_out_of_range_and_storage_types_raise() -> None:
    with pytest.raises(ValueError, match="1000 does not fit dtype int8"):
        result_type(np.empty(1, np.int8), 1000)
    for dt in (gp.float8_e4m3fn, gp.float8_e5m2, gp.int4):
        with pytest.raises(TypeError, match="storage type"):
            result_type(np.empty(1, dt.np_dtype), np.empty(1, np.float32))
        with pytest.raises(TypeError, match="storage type"):
            result_type(np.empty(1, dt.np_dtype), 1.0)
    with pytest.raises(TypeError, match="scalar operand"):
        result_type(np.empty(1, np.float32), "x")


def test_complex_dtypes_resolve_and_describe_themselves() -> None:
    assert as_dtype(np.complex64) is gp.complex64 and as_dtype("cfloat") is gp.complex64
    assert as_dtype(np.complex128) is gp.complex128 and as_dtype("cdouble") is gp.complex128
    assert gp.complex64.kind == "c" and gp.complex64.is_complex and not gp.complex64.is_floating
    assert (gp.complex64.itemsize, gp.complex128.itemsize) == (8, 16)
    assert gp.complex64.dlpack == (5, 64) and gp.complex128.dlpack == (5, 128)
    assert (gp.complex64.typestr, gp.complex128.typestr) == ("<c8", "<c16")
    assert gp.dtypes.from_dlpack_code(5, 128, 1) is gp.complex128
    assert str(gp.complex64) == "pygpukit.complex64"


@pytest.mark.parametrize("cdt", [gp.complex64, gp.complex128], ids=lambda d: d.name)
def test_complex_promotion_raises_naming_the_dtype(cdt: gp.DataType) -> None:
    z = np.empty(1, cdt.np_dtype)
    others = [gp.float32, gp.float64, gp.int32, gp.bool_, gp.complex64, gp.complex128]
    for other in others:
        o = np.empty(1, other.np_dtype)
        with pytest.raises(TypeError, match=f"{cdt.name}.*storage type|storage type {cdt.name}"):
            result_type(z, o)
        with pytest.raises(TypeError, match="storage type"):
            result_type(o, z)
    for scalar in (1, 1.5, True):
        with pytest.raises(TypeError, match=f"storage type {cdt.name}"):
            result_type(z, scalar)
    with pytest.raises(TypeError, match="scalar operand of type complex"):
        result_type(np.empty(1, np.float32), 1j)
