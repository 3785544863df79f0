"""The bandwidth ceiling: device-to-device copy of 1 GiB (bytes read + written)."""

from __future__ import annotations

from typing import Any

import pytest

import pygpukit as gp
from pygpukit import _core

pytestmark = pytest.mark.gpu
N = 1 << 30
GROUP = "copy 1 GiB"


def test_copy_ceiling_pygpukit(bench: Any) -> None:
    a = gp.empty((N,), gp.uint8, device="cuda:0")
    b = gp.empty((N,), gp.uint8, device="cuda:0")
    s = gp.current_stream("cuda:0")
    bench(
        lambda: _core.memcpy_dtod(b.data_ptr(), a.data_ptr(), N, s),
        group=GROUP,
        bytes=2 * N,
        rounds=20,
    )


def test_copy_ceiling_torch(bench: Any) -> None:
    torch = pytest.importorskip("torch")
    a = torch.empty(N, dtype=torch.uint8, device="cuda")
    b = torch.empty(N, dtype=torch.uint8, device="cuda")
    bench(lambda: b.copy_(a), group=GROUP, bytes=2 * N, rounds=20)
