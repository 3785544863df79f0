"""The Triton backend: one module per op family, each kernel next to its launcher, launched on
pygpukit's current stream by pygpukit's own Triton driver (driver.py; no torch).

Plain Python: edit a copy and point ``PYGPUKIT_TRITON_KERNELS`` (or ``gp.routing.load_kernels``)
at its directory to run it instead of the shipped module, with nothing to recompile.
``python -m pygpukit kernels eject <family> DIR`` copies a shipped module there to start from.
Importing this package does not import Triton; the routing table loads modules on first use.

Available with Triton installed and a CUDA driver, or anywhere under ``TRITON_INTERPRET=1``.
The routing table chooses it for CUDA arrays; a forced triton route under the interpreter also
serves CPU-device arrays (routing/select.py), which is how CI runs these kernels without a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from pygpukit.backends._record import Backend, import_family

__all__ = ["BACKEND", "interpreting", "kernel_dir", "set_kernel_dir"]

_lock = threading.Lock()
_kernel_dir: Path | None = None
_kernel_dir_set = False
_user_modules: dict[str, ModuleType | None] = {}


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1``: kernels run in Triton's NumPy interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def kernel_dir() -> Path | None:
    """The user's kernel directory (PYGPUKIT_TRITON_KERNELS or load_kernels), if any."""
    global _kernel_dir, _kernel_dir_set
    if not _kernel_dir_set:
        env = os.environ.get("PYGPUKIT_TRITON_KERNELS")
        _kernel_dir = Path(env) if env else None
        _kernel_dir_set = True
    return _kernel_dir


def set_kernel_dir(path: str | os.PathLike[str] | None) -> None:
    """Serve families from ``path``'s ``<family>.py`` files where present (None: shipped only).
    Each call reloads the user's files, so edits take effect."""
    global _kernel_dir, _kernel_dir_set
    if path is not None and not Path(path).is_dir():
        raise FileNotFoundError(f"kernel directory {path} does not exist")
    with _lock:
        _kernel_dir = None if path is None else Path(path)
        _kernel_dir_set = True
        _user_modules.clear()


def _load_file(name: str, path: Path) -> ModuleType:
    """Import a user's kernel file fresh (a new module object each load, so edits take effect)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernels from {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _module(family: str) -> ModuleType | None:
    """The user's copy of the family when the kernel directory has one, else the shipped one."""
    user = kernel_dir()
    if user is None or not (user / f"{family}.py").is_file():
        return import_family(__name__, family)
    if family not in _user_modules:
        _user_modules[family] = _load_file(f"pygpukit_user_kernels.{family}", user / f"{family}.py")
    return _user_modules[family]


def _probe() -> tuple[bool, str]:
    try:
        import triton  # noqa: F401
    except Exception as exc:  # a broken install is a reason, not a crash
        return False, f"triton is not importable ({type(exc).__name__}: {exc})"
    if interpreting():
        return True, ""
    from pygpukit import _core

    ok, why = _core.driver_status()
    if not ok:
        return False, f"no CUDA driver ({why})"
    from pygpukit.backends.triton_kernels import driver

    driver.install()
    return True, ""


BACKEND: Backend = Backend(
    name="triton",
    package=__name__,
    devices=frozenset({"cuda"}),
    probe=_probe,
    loader=_module,
)
