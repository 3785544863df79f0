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

from pygpukit.backends._record import Backend

__all__ = ["HOMES", "Backend", "records"]

# Backend name -> home package; a new backend is one more line here and a home with a record.
HOMES = {
    "triton": "pygpukit.backends.triton_kernels",
    "native": "pygpukit.backends.native",
    "cpu": "pygpukit.backends.cpu",
}
_records: dict[str, Backend] = {}


def records() -> dict[str, Backend]:
    """Every home's record by backend name (the homes are imported on first use)."""
    if not _records:
        for name, package in HOMES.items():
            rec: Backend = importlib.import_module(package).BACKEND
            assert rec.name == name, (rec.name, name)
            _records[name] = rec
    return _records
