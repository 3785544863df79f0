"""Specific exception classes, exported and subclassing what earlier versions raised."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models import ModelLoadError, UnsupportedModelError

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (gp.ConversionError, (ValueError, TypeError)),
        (gp.ReadOnlyError, (ValueError,)),
        (gp.OverlapError, (ValueError,)),
        (gp.ArrayTooLargeError, (ValueError, OverflowError)),
        (gp.NvrtcUnavailableError, (RuntimeError,)),
        (ModelLoadError, (ValueError,)),
        (UnsupportedModelError, (ModelLoadError,)),
    ],
)
def test_classes_keep_old_excepts_working(cls: type, bases: tuple[type, ...]) -> None:
    assert all(issubclass(cls, b) for b in bases)
    assert cls.__doc__ and len(cls.__doc__) > 40
    assert cls.__name__ in gp.__all__ or cls.__module__.startswith("pygpukit.models")


@pytest.mark.parametrize(
    "shape",
    [(2**40, 2**40), (2**62,), (2**33, 2**31), (2**21, 2**21, 2**21)],
)
def test_huge_shapes(shape: tuple[int, ...]) -> None:
    with pytest.raises(gp.ArrayTooLargeError) as e:
        gp.empty(shape)
    assert str(shape) in str(e.value) and "float32" in str(e.value)
    assert gp.zeros((3,)).to_numpy().tolist() == [0, 0, 0]


def test_jit_without_nvrtc() -> None:
    if gp.is_nvrtc_available():
        pytest.skip("NVRTC is installed here")
    with pytest.raises(gp.NvrtcUnavailableError, match="NVRTC"):
        gp.jit('extern "C" __global__ void k(float* x) {}', func="k")


def test_model_load_error_attributes() -> None:
    e = ModelLoadError("m: bad", file="m", tensor="w", field="shape")
    assert (e.file, e.tensor, e.field, str(e)) == ("m", "w", "shape", "m: bad")
    assert ModelLoadError("plain").file is None


def test_internal_overlap_and_readonly_are_public() -> None:
    a = gp.from_numpy(np.ones(3, np.float32))
    assert a.readonly is False and a.internal_overlap is False
    assert a.broadcast_to((2, 3)).internal_overlap is True
