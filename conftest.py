"""Test configuration shared by tests/ and benchmarks/.

- `gpu`-marked tests run only where a CUDA device is present.
- Without a GPU, Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1) on CPU-device
  arrays; it must be set before any kernel module is imported, hence here.
- PYGPUKIT_TEST_BLOCK_TORCH=1 makes `import torch` fail inside the test process: the GPU check
  runs the Triton suite that way to prove the Triton path needs no torch.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from typing import Any

import pytest


class _BlockTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"import of {name} blocked by PYGPUKIT_TEST_BLOCK_TORCH")
        return None


if os.environ.get("PYGPUKIT_TEST_BLOCK_TORCH") == "1":
    sys.meta_path.insert(0, _BlockTorch())


def _has_gpu() -> bool:
    try:
        from pygpukit import _core

        return bool(_core.device_count() > 0)
    except Exception:
        return False


HAS_GPU = _has_gpu()
if not HAS_GPU and importlib.util.find_spec("triton") is not None:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `slow` tests (the 12,000-file reader fuzz) run with PYGPUKIT_SLOW=1 or `-m slow`.
    if os.environ.get("PYGPUKIT_SLOW") != "1" and "slow" not in (config.option.markexpr or ""):
        slow = pytest.mark.skip(reason="slow: set PYGPUKIT_SLOW=1 or pass -m slow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(slow)
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
