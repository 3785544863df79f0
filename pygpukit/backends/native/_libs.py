"""Where the native backend's libraries come from, each probed once per process:

- cuBLASLt, loaded by the Rust core (pygpukit._core) from the ``nvidia-*`` wheels' ``lib``
  directories or the system's search path (``cublaslt_status``);
- the C++ extension ``_pygpukit_native`` built from ``native/`` by scripts/build_native.sh
  (``extension``, ``status``). It is optional: without it ``status()`` says why, and the routing
  table reports the native candidate of its ops as unavailable (never a silent fallback).

NVRTC (pygpukit/jit.py) searches the same wheel directories through ``nvidia_lib_dirs``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from types import ModuleType

from pygpukit import _core

__all__ = ["cublaslt_status", "extension", "nvidia_lib_dirs", "status"]

_lock = threading.Lock()


def nvidia_lib_dirs(*packages: str) -> list[str]:
    """``lib`` directories of installed ``nvidia-*`` wheels, e.g. nvidia/cu13/lib (CUDA 13
    wheels share one directory) or nvidia/cublas/lib (CUDA 12), for the given package dirs."""
    roots: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots.extend(spec.submodule_search_locations)
    for p in sys.path:
        cand = os.path.join(p or ".", "nvidia")
        if os.path.isdir(cand):
            roots.append(cand)
    out: list[str] = []
    for root in roots:
        for pkg in packages:
            d = os.path.realpath(os.path.join(root, pkg, "lib"))
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


_cublaslt: tuple[bool, str] | None = None


def cublaslt_status() -> tuple[bool, str]:
    """(True, path) when cuBLASLt loads, else (False, the message naming every place searched)."""
    global _cublaslt
    got = _cublaslt
    if got is None:
        with _lock:
            got = _cublaslt
            if got is None:
                try:
                    path, _version = _core.cublaslt_load(nvidia_lib_dirs("cu13", "cu12", "cublas"))
                    got = (True, path)
                except Exception as exc:
                    got = (False, str(exc))
                _cublaslt = got
    return got


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
