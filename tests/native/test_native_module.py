"""The C++ extension itself, without a GPU: it imports (when built), reports its build, maps
errors to Python exceptions (no crash without a driver), and routing sees it."""

from __future__ import annotations

from typing import Any

import pytest
from _routes import native_impl

import pygpukit as gp
from pygpukit.backends import native

ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")


def test_build_facts() -> None:
    assert ext.__version__
    assert "norm" in ext.families
    assert all(a for a in ext.cuda_archs.split(","))
    assert native.status() == (True, "")


def test_cuda_error_is_pygpukit_cuda_error() -> None:
    assert issubclass(ext.CudaError, gp.CudaError)


def test_unknown_dtype_is_value_error() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'bfloat17'"):
        ext.rmsnorm(0, 0, "bfloat17", "float32", 1, 8, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


def test_bad_shape_rejected_before_launch() -> None:
    with pytest.raises(ValueError, match=r"^rmsnorm: rows must be >= 0 and n > 0$"):
        ext.rmsnorm(0, 0, "float32", "float32", 1, 0, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


@pytest.mark.parametrize(
    "family,call,msg",
    [
        ("norm", lambda: ext.layernorm(0, 0, "float32", "float32", 1, 8, 0, 8, 0, 1, 0, 1, 1, 1e-5),
         "^layernorm: x and y must be device pointers$"),
        ("activation", lambda: ext.activation("silu", 0, 0, "float32", 1, 8, 1, 8, 0, 0, 0, 8),
         "^activation: a and y must be device pointers$"),
        ("embedding", lambda: ext.bias_add(0, 0, "float32", "float32", 1, 8, 1, 8, 0, 1, 8),
         "^bias_add: a binary op needs its second operand$"),
    ],
    ids=["layernorm", "activation", "bias_add"],
)  # fmt: skip
def test_shared_checks_name_the_op_called(family: str, call: Any, msg: str) -> None:
    # Checks in helpers shared by several ops (check_rows, check_rowmap) name the op, not the
    # helper, and run before any CUDA call (so also without a driver).
    if family not in ext.families:
        pytest.skip(f"this build lacks the {family} family")
    with pytest.raises(ValueError, match=msg):
        call()


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the no-driver path")
def test_no_driver_raises_cuda_error() -> None:
    with pytest.raises(gp.CudaError, match="cudaGetDevice"):
        ext.rmsnorm(0, 0, "float32", "float32", 1, 8, 1, 8, 1, 1, 0, 0, 1, 0, 1e-6)


def test_lookup_finds_family_module() -> None:
    fn, why = native_impl("rmsnorm")
    assert why == "" and fn is not None and fn.__module__.endswith("backends.native.norm")
    fn, why = native_impl("no_such_op")
    assert fn is None and "no kernel for no_such_op" in why
    fn, why = native_impl("sdpa")  # native/attention.py; "not built" in a partial build
    assert (why == "" and fn.__module__.endswith("backends.native.attention")) or "not built" in why
