"""The comparison helper itself: it must fail on what it claims to catch."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close


def test_passes_within_bound() -> None:
    ref = np.linspace(1.0, 2.0, 33)
    assert_close((ref * (1 + 5e-6)).astype(np.float32), ref, "float32")


def test_fails_on_relative_norm_and_reports_first_indices() -> None:
    ref = np.ones((4, 5))
    out = ref.astype(np.float32).copy()
    out[2, 3] = 1.01
    with pytest.raises(AssertionError) as e:
        assert_close(out, ref, "float32")
    msg = str(e.value)
    assert "(2, 3)" in msg and "relative norm" in msg


def test_fails_on_nan_and_inf() -> None:
    ref = np.ones(7)
    for bad in (np.nan, np.inf):
        out = ref.astype(np.float16).copy()
        out[4] = bad
        with pytest.raises(AssertionError, match=r"at \(4,\)"):
            assert_close(out, ref, "float16")
    # NaN where the reference has NaN is a match.
    ref2 = np.array([1.0, np.nan])
    assert_close(np.array([1.0, np.nan], np.float32), ref2, "float32")


def test_dtype_bounds_and_exact_ints() -> None:
    ref = np.linspace(1.0, 2.0, 9)
    assert_close(ref * (1 + 5e-3), ref, "bfloat16")
    with pytest.raises(AssertionError):
        assert_close(ref * (1 + 5e-3), ref, "float16")
    with pytest.raises(AssertionError, match="exact"):
        assert_close(np.array([1, 2, 4]), np.array([1, 2, 3]))
    with pytest.raises(AssertionError, match="shape"):
        assert_close(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="rtol"):
        assert_close(np.ones(3), np.ones(3), "float8_e4m3fn")
