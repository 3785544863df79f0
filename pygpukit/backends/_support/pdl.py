"""Programmatic dependent launch (sm_90+): whether kernels are launched so, for every home that
launches them (the Triton driver's ``launch_pdl`` and the native decode GEMV's launch). A kernel
launched so may start while the kernel before it on the stream is finishing, once that one has
released it (``griddepcontrol.launch_dependents``) or ended; it must wait
(``griddepcontrol.wait``) before it reads anything an earlier kernel of the stream writes, and
before it writes anything. On where the device supports it; PYGPUKIT_PDL=0 (read at import) or
set_pdl(False) turns it off (the same results; only the timing changes)."""

from __future__ import annotations

import os

from pygpukit import _core, runtime

__all__ = ["pdl_enabled", "set_pdl"]

_pdl_on = [os.environ.get("PYGPUKIT_PDL", "1") != "0"]
_pdl_devices: dict[int, bool] = {}


def set_pdl(on: bool) -> None:
    """Turn programmatic dependent launch on or off for later launches (benchmarks)."""
    _pdl_on[0] = bool(on)


def pdl_enabled(device: runtime.Device) -> bool:
    """Whether kernels on ``device`` use programmatic dependent launch (and its release)."""
    if not _pdl_on[0] or device.type != "cuda":
        return False
    got = _pdl_devices.get(device.index)
    if got is None:
        props = _core.device_properties(device.index)
        got = _pdl_devices[device.index] = int(props["major"]) >= 9
    return got
