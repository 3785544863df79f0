"""The Python side of the C++ extension ``_pygpukit_native`` (built from ``native/``).

One module per op family, named like ``pygpukit/triton_kernels/<family>.py`` and exposing the
same functions with the same signatures, so the routing table's ``native`` candidate serves an
op by the same call as the Triton one. Each function takes validated GPUArrays (the ops layer
checked shapes, dtypes and devices), allocates its output from pygpukit's pool on the current
stream, and passes raw pointers, element strides and that stream to the extension, which
allocates nothing and releases the GIL while it launches.

The extension is optional: without it ``status()`` says why, and the routing table reports the
native candidate of these ops as unavailable (never a silent fallback).
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

__all__ = ["extension", "status"]

_lock = threading.Lock()
_loaded: tuple[ModuleType | None, str] | None = None


def _load() -> tuple[ModuleType | None, str]:
    global _loaded
    got = _loaded
    if got is None:
        with _lock:
            got = _loaded
            if got is None:
                try:
                    got = (importlib.import_module("_pygpukit_native"), "")
                except Exception as exc:  # a broken build is a reason, not a crash
                    got = (None, f"_pygpukit_native is not built ({type(exc).__name__}: {exc})")
                _loaded = got
    return got


def status() -> tuple[bool, str]:
    """(True, "") when the extension imports, else (False, why)."""
    mod, why = _load()
    return mod is not None, why


def extension() -> ModuleType:
    """The loaded extension (BackendUnavailableError naming the cause when it is absent)."""
    mod, why = _load()
    if mod is None:
        from pygpukit.errors import BackendUnavailableError

        raise BackendUnavailableError(why + "; build it with scripts/build_native.sh")
    return mod
