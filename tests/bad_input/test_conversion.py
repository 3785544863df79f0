"""Values that have no exact place in the target dtype are refused, naming value and dtype."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning for an accepted value

NAN, INF = math.nan, math.inf

CREATE = [
    (lambda: gp.asarray([1, 300, -1], dtype="uint8"), "300", "uint8"),
    (lambda: gp.asarray([1, -1], dtype="uint8"), "-1", "uint8"),
    (lambda: gp.asarray([2**31], dtype="int32"), "2147483648", "int32"),
    (lambda: gp.asarray([1.0, NAN], dtype="int32"), "nan", "int32"),
    (lambda: gp.asarray([INF], dtype="int64"), "inf", "int64"),
    (lambda: gp.asarray([1.0, None]), "None", "float32"),
    (lambda: gp.asarray([None, 2], dtype="int32"), "None", "int32"),
    (lambda: gp.asarray([[1, 2], [3, 200]], dtype="int8"), "200", "int8"),
    (lambda: gp.asarray([1e5], dtype="float16"), "100000.0", "float16"),
    (lambda: gp.asarray([1e39], dtype="bfloat16"), "1e+39", "bfloat16"),
    (lambda: gp.asarray([1000.0], dtype="float8_e4m3fn"), "1000.0", "float8_e4m3fn"),
    (lambda: gp.asarray([INF], dtype="float8_e4m3fn"), "inf", "float8_e4m3fn"),
    (lambda: gp.asarray([3e9], dtype="int32"), "3000000000", "int32"),
    (lambda: gp.asarray([2**70], dtype="int64"), "1180591620717411303424", "int64"),
    (lambda: gp.from_numpy(np.array([1, 256]), dtype="uint8"), "256", "uint8"),
    (lambda: gp.from_numpy(np.array([NAN], np.float32), dtype="int16"), "nan", "int16"),
    (lambda: gp.full((3,), NAN, dtype="int32"), "nan", "int32"),
    (lambda: gp.full((3,), INF, dtype="uint8"), "inf", "uint8"),
    (lambda: gp.full((3,), None, dtype="float32"), "None", "float32"),
    (lambda: gp.full((3,), None), "None", "fill value"),
    (lambda: gp.full((3,), 300, dtype="uint8"), "300", "uint8"),
    (lambda: gp.full((3,), -129, dtype="int8"), "-129", "int8"),
    (lambda: gp.full((2,), 9, dtype="int4"), "9", "int4"),
    (lambda: gp.full((3,), 7e4, dtype="float16"), "70000.0", "float16"),
    (lambda: gp.full((3,), "1", dtype="float32"), "'1'", "float32"),
    (lambda: gp.full((3,), 1 + 2j, dtype="float32"), "complex", "float32"),
    (lambda: gp.arange(0, 300, dtype="uint8"), "256", "uint8"),
]


@pytest.mark.parametrize(("call", "value", "dtype"), CREATE)
def test_creation_refuses(call, value: str, dtype: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(gp.ConversionError) as e:
        call()
    assert value in str(e.value) and dtype in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)  # old excepts
    np.testing.assert_array_equal(gp.asarray([1, 2, 255], dtype="uint8").to_numpy(), [1, 2, 255])


SETS = [
    ("int32", 1, NAN, "nan"),
    ("int32", slice(None), INF, "inf"),
    ("int32", 0, None, "None"),
    ("int64", 2, -INF, "-inf"),
    ("uint8", 1, 256, "256"),
    ("uint8", slice(0, 2), -1, "-1"),
    ("int8", 0, 1000, "1000"),
    ("int16", 3, 2**40, "1099511627776"),
    ("float32", 1, None, "None"),
    ("float16", 0, 1e6, "1000000.0"),
    ("bool", 0, NAN, "nan"),
    ("int32", slice(None), [1, NAN, 3, 4], "nan"),
    ("uint8", slice(None), [1, 2, 3, 999], "999"),
    ("float32", slice(None), [1.0, None, 2.0, 3.0], "None"),
    ("int32", slice(None), np.array([1.0, 2.0, 3.0, 1e20]), "1e+20"),
    ("int8", slice(None), ["a", "b", "c", "d"], "<U1"),
]


@pytest.mark.parametrize(("dtype", "key", "value", "shown"), SETS)
def test_setitem_refuses_and_changes_nothing(dtype: str, key, value, shown: str) -> None:  # type: ignore[no-untyped-def]
    a = gp.asarray([1, 0, 1, 1] if dtype == "bool" else [1, 2, 3, 4], dtype=dtype)
    before = a.to_numpy()
    with pytest.raises(gp.ConversionError) as e:
        a[key] = value
    assert shown in str(e.value) and dtype.replace("bool", "bool") in str(e.value)
    np.testing.assert_array_equal(a.to_numpy(), before)
    a[1] = 1
    assert a.to_numpy()[1] == 1


@pytest.mark.parametrize(
    ("dtype", "value", "want"),
    [
        ("uint8", 255, 255),
        ("int8", -128, -128),
        ("int32", 2.9, 2),  # floats into integers truncate toward zero (NumPy's rule)
        ("int32", -2.9, -2),
        ("float16", 65504.0, 65504.0),
        ("float32", NAN, NAN),
        ("float32", -INF, -INF),
        ("float8_e5m2", INF, INF),
        ("bool", 3, True),
        ("int64", np.int64(2**62), 2**62),
    ],
)
def test_exact_values_are_accepted_without_warnings(dtype: str, value, want) -> None:  # type: ignore[no-untyped-def]
    got = gp.full((2,), value, dtype=dtype).to_numpy().astype(np.float64)
    np.testing.assert_array_equal(got, np.float64(want))
    a = gp.zeros((2,), dtype)
    a[0] = value
    np.testing.assert_array_equal(a.to_numpy().astype(np.float64)[0], np.float64(want))
