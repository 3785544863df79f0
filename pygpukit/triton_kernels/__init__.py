"""The Triton kernels' former import path, kept for kernel files edited from an earlier version
(they import ``pygpukit.triton_kernels._common`` and friends). The kernels live in
pygpukit/backends/triton_kernels/; ``pygpukit.triton_kernels.<name>`` is the same module object
as ``pygpukit.backends.triton_kernels.<name>`` (never a second copy with its own compile caches).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

_OLD = __name__
_NEW = "pygpukit.backends.triton_kernels"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``pygpukit.triton_kernels.X`` to the already-imported new module.

    The import system sets ``__spec__`` of what ``create_module`` returns to the alias spec;
    ``exec_module`` puts the real module's spec back (its origin, its loader for reload)."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        real = importlib.import_module(_NEW + spec.name[len(_OLD) :])
        self._specs[real.__name__] = real.__spec__
        return real

    def exec_module(self, module: ModuleType) -> None:
        # The new module has run already: only its spec needs restoring.
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())

_home = importlib.import_module(_NEW)
__path__ = []  # type: ignore[var-annotated]  # a package, so that submodule imports reach the finder
__all__ = list(getattr(_home, "__all__", ()))
globals().update({k: getattr(_home, k) for k in __all__})
