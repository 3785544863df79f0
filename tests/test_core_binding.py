"""The Rust extension on its own (pygpukit._core): pool, streams, events, copies, DLPack.

The checks live in tests/_core_checks.py (plain functions that raise on failure); these tests run
the host part everywhere and the device part on a GPU machine.
"""

from __future__ import annotations

import _core_checks as checks
import pytest

from pygpukit import _core

HAS_GPU = _core.device_count() > 0


def test_exceptions() -> None:
    checks.check_exceptions()


def test_host_pool() -> None:
    checks.check_host_pool()


def test_host_streams_events() -> None:
    checks.check_host_streams_events()


def test_host_copies() -> None:
    checks.check_copies(_core.Pool(device=-1), _core.Stream(-1))


def test_pool_under_threads() -> None:
    checks.check_threads(_core.Pool(device=-1, quota=1 << 30), _core.Stream(-1))


def test_dlpack_host() -> None:
    checks.check_dlpack_host()


@pytest.mark.skipif(HAS_GPU, reason="a driver is present")
def test_no_driver() -> None:
    checks.check_no_driver()


@pytest.mark.gpu
def test_device() -> None:
    checks.check_device()
    assert _core.take_deferred_errors() == []
