"""pygpukit's Triton driver: Triton without torch, on pygpukit's device and current stream.

Triton's stock CUDA driver asks torch for the current device, stream and capability. This one
asks the pygpukit runtime instead, so Triton kernels run with no torch installed, and with torch
installed they still run on ``gp.current_stream()``.

``launch(kernel, grid, *args, **constexprs)`` is the one way kernels are started:
- The first call of a specialization goes through Triton's ``JITFunction.run`` (which compiles or
  loads from the cache). The compiled kernel is then cached under a key at least as fine as
  Triton's own specialization key (dtype and 16-byte alignment of each pointer, the value class of
  each int: ==1, divisible by 16, 32/64-bit), so later calls skip Triton's binder and call the C
  launcher directly with raw pointers.
- Under ``TRITON_INTERPRET=1`` kernels run in Triton's NumPy interpreter on CPU-device arrays:
  pygpukit's host memory is handed to the interpreter in place (no copies), through a small
  adapter that provides the tensor methods the interpreter calls.
- Programmatic dependent launch (sm_90+, ``pdl_enabled``, from backends/_support/pdl.py: the
  native decode GEMV launches so too): a kernel launched with
  ``launch_pdl=True`` may start while the kernel before it on the stream is finishing, once that
  one has released it (``gdc_launch_dependents``) or ended. Such a kernel must call ``gdc_wait``
  before it reads anything an earlier kernel of the stream writes, and before it writes anything
  (the decode GEMV of gemv_dense.py; the kernels ahead of it release it early: norm.py's
  contiguous RMSNorm, and attention_decode.py's kernel where it combines its own splits; the
  cache write and decode attention are launched so too, behind their PDL_LAUNCH knobs). The
  first launch of a specialization goes through the slow path, where check_pdl refuses one
  whose kernel is not told to wait; the native fast path then launches it with the attribute
  (cuLaunchKernelEx), under a key that includes the constexprs check_pdl read.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import triton
import triton.language as tl
from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils
from triton.runtime.interpreter import InterpretedFunction, TensorHandle

from pygpukit import _core, runtime
from pygpukit.array import GPUArray
from pygpukit.backends._support.pdl import pdl_enabled, set_pdl
from pygpukit.backends.triton_kernels import interpreting

__all__ = [
    "PygpukitCudaDriver",
    "cache_dir",
    "check_pdl",
    "install",
    "launch",
    "pdl_enabled",
    "set_pdl",
]


def cache_dir() -> Path:
    """Triton's compile cache (pygpukit-owned): $PYGPUKIT_TRITON_CACHE_DIR or ~/.cache/pygpukit."""
    env = os.environ.get("PYGPUKIT_TRITON_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pygpukit" / "triton"


class PygpukitCudaDriver(CudaDriver):  # type: ignore[misc]
    """CudaDriver whose device, stream and capability come from pygpukit, never from torch."""

    def __init__(self) -> None:
        # GPUDriver.__init__ imports torch; set its four callables ourselves instead.
        self.utils = CudaUtils()
        self.launcher_cls = CudaLauncher
        self._capabilities: dict[int, tuple[int, int]] = {}
        self.get_current_device = _current_device
        self.set_current_device = _set_current_device
        self.get_current_stream = _current_stream_handle
        self.get_device_capability = self._capability

    def _capability(self, device: int = 0) -> tuple[int, int]:
        cap = self._capabilities.get(device)
        if cap is None:
            props = _core.device_properties(device)
            cap = (int(props["major"]), int(props["minor"]))
            self._capabilities[device] = cap
        return cap

    @staticmethod
    def is_active() -> bool:
        return bool(_core.device_count() > 0)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", _current_device())

    def get_empty_cache_for_benchmark(self) -> GPUArray:
        # 256 MiB, like Triton's own, to flush L2 between timed runs.
        return runtime_empty((256 << 20) // 4, "int32")

    def clear_cache(self, cache: GPUArray) -> None:
        cache.fill_(0)


def runtime_empty(n: int, dtype: str) -> GPUArray:
    from pygpukit.creation import empty

    return empty((n,), dtype, runtime.Device("cuda", _current_device()))


class _LaunchState(threading.local):
    def __init__(self) -> None:
        self.device = 0
        self.ready: set[int] = set()


_state = _LaunchState()


def _current_device() -> int:
    return _state.device


def _set_current_device(index: int) -> None:
    _state.device = int(index)


def _current_stream_handle(index: int | None = None) -> int:
    dev = runtime.Device("cuda", _state.device if index is None else index)
    handle: int = runtime.current_stream(dev).handle
    return handle


_installed = False
_install_lock = threading.Lock()


class _NoTorchHere(threading.local):
    """A meta-path finder that refuses ``import torch`` in the threads that switched it on.

    Installed once and never removed: editing sys.meta_path while another thread's import
    walks it could make that import skip a finder."""

    on = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if self.on and (name == "torch" or name.startswith("torch.")):
            raise ImportError(f"{name} is not imported while Triton sets up its specializer")


_no_torch = _NoTorchHere()


def _prime_specializer() -> None:
    """Set up Triton's native argument specializer without importing torch.

    Its one-time set-up imports torch when torch is installed, only to recognise torch.Tensor
    arguments by type; without it they are recognised by their data_ptr attribute, with the
    same result. pygpukit never passes torch tensors, and that import cost 2.5-3 s of the first
    Triton launch of a process on an H100 host (import pygpukit + first op: 4.0 s). So the
    set-up runs here, once, with ``import torch`` refused in this thread (other threads import
    normally). If torch is already imported, or the set-up fails, nothing is changed and the
    first launch sets it up as usual."""
    if "torch" in sys.modules:
        return
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend
    except ImportError:  # another Triton version: it sets itself up as it does
        return
    if _no_torch not in sys.meta_path:
        sys.meta_path.insert(0, _no_torch)  # type: ignore[arg-type]
    _no_torch.on = True
    try:
        native_specialize_impl(BaseBackend, 1, False, True, True)
    except Exception:  # the first launch retries the set-up, torch allowed
        pass
    finally:
        _no_torch.on = False


def _stored_triton_key() -> None:
    """Serve Triton's ``triton_key`` (the part of every compile-cache key that identifies Triton
    itself) from pygpukit's cache directory.

    Triton computes it once a process, at the first cache lookup, by hashing its compiler,
    backend and language sources (importing every package among them) and its libtriton shared
    library (hundreds of MB): 0.4 s of the first launch on an H100 host, although the value
    changes only with those files. Here it is stored under a stamp of the same files
    (triton_stamp) and Triton's version, and recomputed by Triton whenever the stamp changes."""
    import functools

    from triton.runtime import cache as tcache

    original = getattr(tcache, "triton_key", None)
    if original is None or getattr(original, "_pygpukit", False):
        return  # another Triton layout, or already served from here

    @functools.lru_cache
    def triton_key() -> str:
        path = cache_dir() / "triton_key" / triton_stamp(Path(tcache.__file__).resolve().parents[1])
        try:
            return path.read_text()
        except OSError:
            pass
        value: str = original()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(value)
            os.replace(tmp, path)  # atomic: a concurrent process reads all or nothing
        except OSError:
            pass  # a read-only cache directory: computed each process, as Triton does
        return value

    triton_key._pygpukit = True  # type: ignore[attr-defined]
    tcache.triton_key = triton_key
    autotuner = sys.modules.get("triton.runtime.autotuner")
    if autotuner is not None and hasattr(autotuner, "triton_key"):
        setattr(autotuner, "triton_key", triton_key)  # noqa: B010 - untyped module attribute


def triton_stamp(root: Path) -> str:
    """A hash of Triton's version, the contents of every .py file and the path, size and mtime
    of every .so file under root's compiler, backends, language, runtime and _C directories,
    symbolic links followed (a superset of what triton_key hashes; a source install links its
    backends in)."""
    import hashlib

    stamp = hashlib.sha256(triton.__version__.encode())
    for sub in ("compiler", "backends", "language", "runtime", "_C"):
        for dirpath, dirnames, files in os.walk(root / sub, followlinks=True):
            dirnames.sort()
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                if f.endswith(".py"):
                    with open(full, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                    stamp.update(f"{os.path.relpath(full, root)}:{digest};".encode())
                elif f.endswith(".so"):
                    st = os.stat(full)
                    real = os.path.realpath(full)
                    stamp.update(f"{real}:{st.st_size}:{st.st_mtime_ns};".encode())
    return stamp.hexdigest()


def install() -> None:
    """Make pygpukit's driver Triton's active driver and point Triton's cache at pygpukit's."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        path = cache_dir()
        path.mkdir(parents=True, exist_ok=True)
        triton.knobs.cache.dir = str(path)
        if not interpreting():
            triton.runtime.driver.set_active(PygpukitCudaDriver())
            _prime_specializer()
            _stored_triton_key()
        _installed = True


# ----- launching --------------------------------------------------------------------------------

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _int_class(v: int) -> int:
    # Triton specializes ints equal to 1 and ints divisible by 16, and picks i32 or i64 by range.
    c = 1 if v == 1 else (2 if v % 16 == 0 else 3)
    return c if _I32_MIN <= v <= _I32_MAX else c + 4


class _Fast:
    """A compiled kernel with everything its C launcher needs, minus the per-call values.

    Triton 3.6's C launcher takes a value for every kernel parameter, constexprs included (it
    skips them itself), so ``tail`` holds the values of the parameters after the positional ones
    (keyword constexprs or defaults), fixed per cache entry because the key includes them.
    """

    __slots__ = ("c_launch", "coop", "function", "packed", "pdl", "tail")

    def __init__(
        self, compiled: Any, kernel: Any, n_positional: int, constexprs: dict[str, Any]
    ) -> None:
        compiled._init_handles()
        run = compiled.run
        self.c_launch = run.launch
        self.function = compiled.function
        self.coop = run.launch_cooperative_grid
        self.pdl = run.launch_pdl
        self.packed = compiled.packed_metadata
        # The specialization key includes the constexpr values, so the tail is fixed per entry.
        self.tail = tuple(
            constexprs.get(p.name, p.default if p.has_default else None)
            for p in kernel.params[n_positional:]
        )


def _fast_ok(compiled: Any) -> bool:
    run = compiled.run
    return bool(run.global_scratch_size == 0 and run.profile_scratch_size == 0)


def _hooks_active() -> bool:
    """Launch hooks (profilers) need Triton's full launch path; 3.6 keeps them in a HookChain."""
    hook = triton.knobs.runtime.launch_enter_hook
    return hook is not None and bool(getattr(hook, "calls", True))


_fast_cache: dict[tuple[Any, ...], _Fast | None] = {}
_cuda_devices: dict[int, runtime.Device] = {}


def _cuda_device(index: int) -> runtime.Device:
    dev = _cuda_devices.get(index)
    if dev is None:
        dev = _cuda_devices[index] = runtime.Device("cuda", index)
    return dev


# Launchers cached in Rust (pygpukit._core.TritonFastPath): key and raw values in one native pass
# over the arguments, then cuLaunchKernel. Kernels it cannot pass use _fast_cache above.
_native_fast = _core.TritonFastPath(GPUArray)
_pinned: dict[int, Any] = {}


def launch(kernel: Any, grid: tuple[int, ...], *args: Any, **constexprs: Any) -> None:
    """Launch ``kernel`` on ``grid`` on pygpukit's current stream of the arrays' device."""
    if type(kernel) is InterpretedFunction:
        _launch_interpreted(kernel, grid, args, constexprs)
        return
    if not _installed:
        install()
    consts = tuple(constexprs.items())
    dev = _state.device
    if dev in _state.ready and not _hooks_active():
        n = len(grid)
        g = (grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1)
        stream = runtime.current_stream(_cuda_device(dev)).handle
        if _native_fast.launch(id(kernel), dev, stream, g, args, consts):
            return
    _launch_slow(kernel, grid, args, constexprs, consts)


def check_pdl(kernel: Any, constexprs: dict[str, Any]) -> None:
    """Refuse a launch with ``launch_pdl=True`` unless the kernel is told to wait (its ``PDL``
    constexpr True, behind which it calls ``gdc_wait`` before it reads anything an earlier
    kernel may write): such a kernel may start while the one before it on the stream still
    runs, and would read its inputs half-written. The first launch of every specialization
    goes through the slow path, and both caches key on the constexprs (``launch_pdl`` and
    ``PDL`` among them), so this holds for every later launch too."""
    if constexprs.get("launch_pdl") and not constexprs.get("PDL"):
        name = getattr(getattr(kernel, "fn", kernel), "__name__", repr(kernel))
        raise RuntimeError(
            f"launch: {name} is launched with launch_pdl=True but without PDL=True; a kernel "
            "launched early must wait on the kernel before it (gdc_wait) before it reads"
        )


def _launch_slow(
    kernel: Any,
    grid: tuple[int, ...],
    args: tuple[Any, ...],
    constexprs: dict[str, Any],
    consts: tuple[tuple[str, Any], ...],
) -> None:
    """First call of a specialization (compile or load, then cache), or a call the native path
    does not take (launch hooks, another device, unusual arguments)."""
    check_pdl(kernel, constexprs)
    dev_index = 0
    key: list[Any] = [id(kernel)]
    values: list[Any] = []
    for a in args:
        t = type(a)
        if t is GPUArray:
            dt = a._dtype
            p = a._ptr + ((a._offset * dt.bits) >> 3)  # data_ptr(), int4-aware
            dev_index = a._device.index
            key.append((dt, p & 15 == 0))
            values.append(p)
        elif t is int:
            key.append(_int_class(a))
            values.append(a)
        elif t is float:
            key.append(float)
            values.append(a)
        else:  # None, bool, a foreign tensor: keyed by value/type as Triton would specialize it
            key.append(a if a is None or t is bool else t)
            values.append(a)
    key.append(consts)
    key.append(dev_index)
    k = tuple(key)
    if dev_index not in _state.ready:
        _core.make_current(dev_index)
        _state.ready.add(dev_index)
    _state.device = dev_index  # what Triton's driver reports, and the native path's device
    fast = _fast_cache.get(k)
    if fast is not None and not _hooks_active():
        n = len(grid)
        g0, g1, g2 = grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1
        if g0 * g1 * g2 > 0:
            stream = runtime.current_stream(_cuda_device(dev_index)).handle
            # fmt: off
            fast.c_launch(g0, g1, g2, stream, fast.function, fast.coop, fast.pdl, None, None,
                          fast.packed, None, None, None, *values, *fast.tail)
            # fmt: on
        return
    compiled = kernel[grid](*args, **constexprs)
    if k in _fast_cache:
        return
    # Both caches key on id(kernel): keep the kernel alive so its id is never reused by another
    # object (a reloaded user module's new kernel, say) while entries refer to it.
    _pinned[id(kernel)] = kernel
    if _register_native(compiled, kernel, args, consts, dev_index):
        _fast_cache[k] = None  # served by the native path from now on
    else:
        _fast_cache[k] = (
            _Fast(compiled, kernel, len(args), constexprs) if _fast_ok(compiled) else None
        )


def _register_native(
    compiled: Any, kernel: Any, args: tuple[Any, ...], consts: tuple[Any, ...], dev: int
) -> bool:
    """Cache ``compiled`` in the native fast path when cuLaunchKernel (cuLaunchKernelEx for a
    programmatic dependent launch) can start it: one CTA a cluster, not cooperative, no
    scratch."""
    if not _fast_ok(compiled):
        return False
    md = compiled.metadata
    run = compiled.run
    if md.num_ctas != 1 or run.launch_cooperative_grid:
        return False
    signature = list(compiled.src.signature.values())
    if not all(isinstance(t, str) for t in signature):
        return False
    # fmt: off
    ok: bool = _native_fast.register(
        id(kernel), dev, args, consts, compiled.function, md.num_warps, md.shared, signature,
        bool(run.launch_pdl),
    )
    # fmt: on
    return ok


# ----- interpreter adapter ----------------------------------------------------------------------


class _Storage:
    """Host memory standing in for a torch storage: the interpreter reads it in place."""

    __slots__ = ("base",)

    def __init__(self, base: int) -> None:
        self.base = base

    def data_ptr(self) -> int:
        return self.base

    def cpu(self) -> _Storage:
        return self

    def copy_(self, other: _Storage) -> None:
        # Same memory on both sides: the interpreter's results are already in place.
        return None


class _InterpTensor:
    """The tensor methods Triton's interpreter calls, over a CPU-device GPUArray (no copies)."""

    __slots__ = ("_ptr", "_storage", "arr", "dtype")

    def __init__(self, arr: GPUArray | None, dtype: Any) -> None:
        self.arr = arr
        self.dtype = dtype
        self._ptr = 0 if arr is None else arr.data_ptr()
        self._storage = None if arr is None else _Storage(arr._ptr)

    def data_ptr(self) -> int:
        return self._ptr

    def untyped_storage(self) -> _Storage:
        assert self._storage is not None
        return self._storage

    def storage_offset(self) -> int:
        assert self.arr is not None
        return self.arr._offset

    def size(self) -> tuple[int, ...]:
        assert self.arr is not None
        return self.arr.shape

    def stride(self) -> tuple[int, ...]:
        assert self.arr is not None
        return self.arr.element_strides

    def new_empty(self, *_: Any, **__: Any) -> _InterpTensor:
        return _InterpTensor(None, self.dtype)

    def set_(self, storage: _Storage, offset: int, size: Any, stride: Any) -> None:
        self._storage = storage
        self._ptr = storage.base + offset * self.dtype.itemsize


# Launch keywords that are compile options, not kernel parameters: the interpreter takes none.
_COMPILE_OPTIONS = frozenset({"num_warps", "num_stages", "enable_fp_fusion", "launch_pdl"})


def _is_f64(annotation: Any) -> bool:
    """A parameter annotated tl.float64: the object, or its text under postponed annotations."""
    if annotation is tl.float64:
        return True
    return isinstance(annotation, str) and annotation.strip().removeprefix("tl.") in (
        "float64",
        "fp64",
    )


def _f64_params(kernel: Any) -> frozenset[int]:
    """Positions of the kernel's parameters annotated tl.float64 (``scale: tl.float64``). On the
    GPU Triton passes those scalars as float64; the interpreter would make a Python float a
    float32 constant, so the adapter hands it a float64 scalar tensor instead. (launch passes
    kernel arguments by position and only constexprs by keyword.)"""
    got = _F64_PARAMS.get(kernel.fn)
    if got is None:
        params = inspect.signature(kernel.fn).parameters.values()
        got = frozenset(i for i, p in enumerate(params) if _is_f64(p.annotation))
        _F64_PARAMS[kernel.fn] = got
    return got


_F64_PARAMS: dict[Any, frozenset[int]] = {}


def _launch_interpreted(
    kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], constexprs: dict[str, Any]
) -> None:
    check_pdl(kernel, constexprs)
    f64 = _f64_params(kernel)
    adapted = []
    for i, a in enumerate(args):
        if isinstance(a, GPUArray):
            if a.device.type != "cpu":
                raise ValueError("under TRITON_INTERPRET=1 kernels run on CPU-device arrays only")
            adapted.append(_InterpTensor(a, a.dtype))
        elif i in f64 and isinstance(a, (int, float)):
            handle = TensorHandle(np.array([a], dtype=np.float64), tl.float64)
            adapted.append(tl.tensor(handle, tl.float64))
        else:
            adapted.append(a)
    kwargs = {k: v for k, v in constexprs.items() if k not in _COMPILE_OPTIONS}
    kernel[grid](*adapted, **kwargs)
