"""Shared setup of the native-backend tests (cuBLASLt matmul, NVRTC jit, precision switch).

This directory has no __init__.py (a package named ``native`` could shadow the C++ project
directory of that name), so put tests/ on the path for the shared _assert/_data helpers.
GPU tests carry the ``gpu`` marker; the root conftest skips them without a device.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture
def exact_fp32() -> Iterator[None]:
    """The default matmul precision, whatever the environment says, restored afterwards."""
    from pygpukit import precision

    prev = precision._explicit
    precision.set_matmul_precision("highest")
    yield
    precision._explicit = prev
