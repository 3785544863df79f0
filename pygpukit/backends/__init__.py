"""The backend homes, side by side, each a package with one module per op family (the routing
table's family names) and one ``Backend`` record (pygpukit/backends/_record.py):

- ``triton_kernels/``: Triton kernels (the first choice for the ops it serves);
- ``native/``: cuBLASLt and the CUDA kernels of the C++ extension;
- ``cpu/``: the NumPy reference and the CPU device's backend.

``_support/`` holds the host-side plumbing both GPU homes share. Backends never import
pygpukit.ops: they call their own siblings or ``_support``.
"""

from __future__ import annotations

import importlib
import threading

from pygpukit.backends._record import Backend

__all__ = ["HOMES", "Backend", "records"]

# Backend name -> home package; a new backend is one more line here and a home with a record.
HOMES = {
    "triton": "pygpukit.backends.triton_kernels",
    "native": "pygpukit.backends.native",
    "cpu": "pygpukit.backends.cpu",
}
_records: dict[str, Backend] | None = None
_lock = threading.Lock()


def records() -> dict[str, Backend]:
    """Every home's record by backend name (the homes are imported on first use). The dict is
    built whole under a lock and then published, so a thread never sees it half filled."""
    global _records
    got = _records
    if got is None:
        with _lock:
            got = _records
            if got is None:
                built: dict[str, Backend] = {}
                for name, package in HOMES.items():
                    rec: Backend = importlib.import_module(package).BACKEND
                    if rec.name != name:
                        raise ImportError(f"{package}.BACKEND is named {rec.name!r}, not {name!r}")
                    built[name] = rec
                _records = got = built
    return got
