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


def test_triton_fast_path_registers_only_what_it_can_pass() -> None:
    import numpy as np

    import pygpukit as gp
    from pygpukit.array import GPUArray

    fast = _core.TritonFastPath(GPUArray)
    x = gp.from_numpy(np.zeros(4, np.float32), device="cpu")
    consts = (("BLOCK", 16),)
    # fp16 scalar parameters and non-constexpr parameters after the positional ones: refused.
    assert not fast.register(1, 0, (x, 3), consts, 0, 4, 0, ["*fp32", "fp16", "constexpr"])
    assert not fast.register(1, 0, (x,), consts, 0, 4, 0, ["*fp32", "i32"])
    assert not fast.register(1, 0, (x, object()), consts, 0, 4, 0, ["*fp32", "i32"])
    assert len(fast) == 0
    assert fast.register(1, 0, (x, 3, 2.5), consts, 0, 4, 0, ["*fp32", "i32", "fp32", "constexpr"])
    assert len(fast) == 1
    # Misses: another kernel, another int class (16 | n), another constexpr value, a device.
    assert not fast.launch(2, 0, 0, (1, 1, 1), (x, 3, 2.5), consts)
    assert not fast.launch(1, 0, 0, (1, 1, 1), (x, 32, 2.5), consts)
    assert not fast.launch(1, 0, 0, (1, 1, 1), (x, 3, 2.5), (("BLOCK", 32),))
    assert not fast.launch(1, 1, 0, (1, 1, 1), (x, 3, 2.5), consts)
    # A hit with an empty grid launches nothing and reports success.
    assert fast.launch(1, 0, 0, (0, 1, 1), (x, 5, 1.0), consts)
    # A programmatic dependent launch is cached too, under its own constexprs (the key).
    pdl = (("BLOCK", 16), ("PDL", True), ("launch_pdl", True))
    assert fast.register(1, 0, (x, 3, 2.5), pdl, 0, 4, 0, ["*fp32", "i32", "fp32", "constexpr"],
                         pdl=True)  # fmt: skip
    assert len(fast) == 2
    assert fast.launch(1, 0, 0, (1, 0, 1), (x, 3, 2.5), pdl)
    assert not fast.launch(1, 0, 0, (1, 1, 1), (x, 3, 2.5), (("BLOCK", 16), ("PDL", True)))
    fast.clear()
    assert len(fast) == 0
