"""The backends the routing table names: whether each is available (and why not), and where an
op's implementation lives.

- ``triton``: ``pygpukit/triton_kernels/<family>.py`` (or the user's edited copy from
  ``PYGPUKIT_TRITON_KERNELS`` / ``load_kernels``), launched through pygpukit's Triton driver.
  Available with Triton installed and a CUDA driver, or anywhere under ``TRITON_INTERPRET=1``
  (then it also serves CPU-device arrays, for testing kernels without a GPU).
- ``native``: ``pygpukit/backends/native.py``: cuBLASLt products through the Rust core
  (matmul, linear, linear_bias_gelu), and the ops of the ``_pygpukit_native`` C++ extension
  (CUTLASS, CUDA kernels) when it is built. Available with a CUDA driver; each op then reports
  what it lacks (cuBLASLt not found, extension not built).
- ``cpu``: the NumPy backend, ``pygpukit/backends/cpu``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from pygpukit import _memory
from pygpukit.array import GPUArray

__all__ = ["availability", "implementation", "set_kernel_dir", "kernel_dir", "interpreting"]

_lock = threading.Lock()
_avail: dict[str, tuple[bool, str]] = {}
_modules: dict[tuple[str, str], ModuleType | None] = {}
_kernel_dir: Path | None = None
_kernel_dir_set = False


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def availability(backend: str) -> tuple[bool, str]:
    """(available, reason when not) for a backend; computed once per process."""
    got = _avail.get(backend)
    if got is None:
        with _lock:
            got = _avail.get(backend) or _probe(backend)
            _avail[backend] = got
    return got


def _probe(backend: str) -> tuple[bool, str]:
    if backend == "cpu":
        return True, ""
    if backend == "triton":
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
        from pygpukit.triton_kernels import driver

        driver.install()
        return True, ""
    if backend == "native":
        # cuBLASLt and NVRTC live in pygpukit._core (always built); each op's implementation
        # says what it lacks (pygpukit.backends.native.lookup). Without a driver, nothing runs.
        from pygpukit import _core

        ok, why = _core.driver_status()
        if ok:
            return True, ""
        reason = f"no CUDA driver ({why})"
        try:
            importlib.import_module("_pygpukit_native")
        except Exception as exc:
            reason += f"; the native extension is not built ({type(exc).__name__}: {exc})"
        return False, reason
    return False, f"unknown backend {backend!r}"


def kernel_dir() -> Path | None:
    """The user's kernel directory (PYGPUKIT_TRITON_KERNELS or load_kernels), if any."""
    global _kernel_dir, _kernel_dir_set
    if not _kernel_dir_set:
        env = os.environ.get("PYGPUKIT_TRITON_KERNELS")
        _kernel_dir = Path(env) if env else None
        _kernel_dir_set = True
    return _kernel_dir


def set_kernel_dir(path: str | os.PathLike[str] | None) -> None:
    global _kernel_dir, _kernel_dir_set
    if path is not None and not Path(path).is_dir():
        raise FileNotFoundError(f"kernel directory {path} does not exist")
    with _lock:
        _kernel_dir = None if path is None else Path(path)
        _kernel_dir_set = True
        _modules.clear()


def _triton_module(family: str) -> ModuleType | None:
    key = ("triton", family)
    if key in _modules:
        return _modules[key]
    user = kernel_dir()
    mod: ModuleType | None
    if user is not None and (user / f"{family}.py").is_file():
        mod = _load_file(f"pygpukit_user_kernels.{family}", user / f"{family}.py")
    else:
        try:
            mod = importlib.import_module(f"pygpukit.triton_kernels.{family}")
        except ModuleNotFoundError as exc:
            if exc.name != f"pygpukit.triton_kernels.{family}":
                raise
            mod = None
    _modules[key] = mod
    return mod


def _load_file(name: str, path: Path) -> ModuleType:
    """Import a user's kernel file fresh (a new module object each load, so edits take effect)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load kernels from {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def implementation(backend: str, family: str, op: str) -> tuple[Callable[..., Any] | None, str]:
    """(callable, "") or (None, why not) for ``op`` on ``backend``."""
    if backend == "triton":
        mod = _triton_module(family)
        fn = getattr(mod, op, None) if mod is not None else None
        where = f"pygpukit.triton_kernels.{family}"
        return (fn, "") if fn is not None else (None, f"{where} has no kernel for {op}")
    if backend == "native":
        from pygpukit.backends import native

        return native.lookup(op)
    if backend == "cpu":
        return _numpy_call(op), ""
    return None, f"unknown backend {backend!r}"


def _numpy_call(op: str) -> Callable[..., Any]:
    """Adapt a NumPy backend function to GPUArray in, GPUArray out (CPU device only)."""
    from pygpukit.backends import cpu

    fn = getattr(cpu, op)

    def call(*inputs: Any, out: GPUArray | None = None, **params: Any) -> Any:
        dev = next(a.device for a in inputs if isinstance(a, GPUArray))
        res = fn(*(_host(a) for a in inputs), **params)
        if res is None:  # an in-place op (kv_cache_write) wrote through the host views
            return None
        if isinstance(res, tuple):
            return tuple(_wrap(r, dev, None) for r in res)
        return _wrap(res, dev, out)

    call.__name__ = op
    return call


def _host(a: Any) -> Any:
    if isinstance(a, GPUArray):
        return a.to_numpy() if a.dtype.is_packed else _memory.host_view(a)
    return a


def _wrap(res: Any, dev: Any, out: GPUArray | None) -> GPUArray:
    from pygpukit.creation import from_numpy

    res = np.asarray(res)
    if out is not None:
        if out.dtype.is_packed:
            _memory.upload(out, res)
        else:
            np.copyto(_memory.host_view(out), res, casting="unsafe")
        return out
    return from_numpy(res, device=dev)
