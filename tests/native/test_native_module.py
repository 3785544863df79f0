"""The C++ extension itself, without a GPU: it imports (when built), reports its build, maps
errors to Python exceptions (no crash without a driver), and routing sees it."""

from __future__ import annotations

import pytest

import pygpukit as gp
from pygpukit.backends import native, native_kernels

ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")


def test_build_facts() -> None:
    assert ext.__version__
    assert "norm" in ext.families
    assert all(a for a in ext.cuda_archs.split(","))
    assert native_kernels.status() == (True, "")


def test_cuda_error_is_pygpukit_cuda_error() -> None:
    assert issubclass(ext.CudaError, gp.CudaError)


def test_unknown_dtype_is_value_error() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'bfloat17'"):
        ext.rmsnorm(0, 0, "bfloat17", "float32", 1, 8, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


def test_bad_shape_rejected_before_launch() -> None:
    with pytest.raises(ValueError, match="rows must be >= 0 and n > 0"):
        ext.rmsnorm(0, 0, "float32", "float32", 1, 0, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the no-driver path")
def test_no_driver_raises_cuda_error() -> None:
    with pytest.raises(gp.CudaError, match="cudaGetDevice"):
        ext.rmsnorm(0, 0, "float32", "float32", 1, 8, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


def test_lookup_finds_family_module() -> None:
    fn, why = native.lookup("rmsnorm")
    assert why == "" and fn is not None and fn.__module__.endswith("native_kernels.norm")
    fn, why = native.lookup("no_such_op")
    assert fn is None and "no kernel for no_such_op" in why
    fn, why = native.lookup("sdpa")  # native_kernels/attention.py; "not built" in a partial build
    assert (why == "" and fn.__module__.endswith("native_kernels.attention")) or "not built" in why
