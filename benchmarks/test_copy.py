"""The bandwidth ceiling: device-to-device copy of 1 GiB (bytes read + written)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.gpu
N = 1 << 30
GROUP = "copy 1 GiB"


def test_copy_ceiling_pygpukit(copy_ceiling: Callable[[], None]) -> None:
    copy_ceiling()


def test_copy_ceiling_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    a = torch.empty(N, dtype=torch.uint8, device="cuda")
    b = torch.empty(N, dtype=torch.uint8, device="cuda")
    bench(lambda: b.copy_(a), group=GROUP, bytes=2 * N, rounds=20)
