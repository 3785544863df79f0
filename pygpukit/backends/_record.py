"""The contract every backend home declares: one ``Backend`` record in its ``__init__.py``.

A home is a package under pygpukit/backends/ holding one module per op family, named as the
routing table's family (``norm.py``, ``softmax.py``, ``attention.py``, ...), each module exposing
the family's ops as functions of the op's name. The record says:

- ``name``: the routing table's backend name (``triton``, ``native``, ``cpu``);
- ``devices``: the device types it runs on;
- ``probe()``: ``(available, reason when not)``, computed once per process by routing;
- ``module(family)``: the module serving a family, or None (the default imports
  ``<package>.<family>``; Triton first looks in the user's kernel directory);
- ``family_status(family)``: ``(usable, reason)`` for a family whose module exists but may lack
  what it runs on (the native extension built without that family, cuBLASLt not found);
- ``adapt(fn)``: wraps an op function into the routed calling convention (GPUArray inputs,
  ``out=`` keyword, GPUArray result); None when the functions already follow it.

The routing layer (pygpukit/routing/backends.py) has the one lookup rule over these records:
``module(family)`` -> ``getattr(module, op)`` -> ``family_status(family)`` -> ``adapt``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = ["Backend", "import_family"]


def _always(family: str) -> tuple[bool, str]:
    return True, ""


def import_family(package: str, family: str) -> ModuleType | None:
    """``<package>.<family>``, or None when no such module exists (an ImportError raised
    *inside* an existing module is a real error and propagates)."""
    name = f"{package}.{family}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


@dataclass(frozen=True)
class Backend:
    name: str
    package: str
    devices: frozenset[str]
    probe: Callable[[], tuple[bool, str]]
    loader: Callable[[str], ModuleType | None] | None = None
    family_status: Callable[[str], tuple[bool, str]] = field(default=_always)
    adapt: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None

    def module(self, family: str) -> ModuleType | None:
        """The module serving ``family`` on this backend, or None."""
        if self.loader is not None:
            return self.loader(family)
        return import_family(self.package, family)
