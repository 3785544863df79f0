"""Device fixture for the Triton kernel tests.

``device`` is "cuda:0" when a CUDA device is present. Otherwise the kernels run on the CPU device
under Triton's interpreter, which needs TRITON_INTERPRET=1 set before triton is imported (the
root conftest arranges that in CI); without it the test is skipped. Without triton installed
every test module here skips at import (pytest.importorskip).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

# tests/ holds the shared _assert/_data helpers; this directory has no __init__.py (a package
# named triton_kernels would shadow the PyPI package of that name), so put tests/ on the path.
_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


def _has_gpu() -> bool:
    try:
        from pygpukit import _core

        return bool(_core.device_count() > 0)
    except Exception:
        return False


HAS_GPU = _has_gpu()
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.fixture
def device() -> str:
    if HAS_GPU:
        return "cuda:0"
    if not INTERPRET:
        pytest.skip("no CUDA device, and TRITON_INTERPRET=1 is not set for the interpreter")
    return "cpu"


@pytest.fixture
def fused_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The n of every launch of the FFT's one-kernel path (triton_kernels/fft.py's
    fused_transform) during the test."""
    from pygpukit.backends.triton_kernels import fft as tfft

    calls: list[int] = []
    real = tfft.fused_transform

    def spy(*a: Any, **kw: Any) -> None:
        calls.append(kw["n"])
        real(*a, **kw)

    monkeypatch.setattr(tfft, "fused_transform", spy)
    return calls


def pytest_configure(config: pytest.Config) -> None:
    # The interpreter evaluates masked-off lanes too (e.g. 1/sqrt(0) past the end of a row);
    # NumPy's warnings about them are noise, the stored results are what the tests check.
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.runtime.interpreter")
