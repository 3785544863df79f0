"""Test configuration: `gpu`-marked tests run only where a CUDA device is present."""

from __future__ import annotations

import pytest


def _has_gpu() -> bool:
    try:
        from pygpukit import _core

        return bool(_core.device_count() > 0)
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cuda() -> str:
    """The device string for GPU tests."""
    return "cuda:0"
