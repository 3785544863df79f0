"""User CUDA kernels compiled at run time with NVRTC: ``gp.jit``.

```python
src = '''
extern "C" __global__ void scale(float* x, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
'''
kernel = gp.jit(src, func="scale")
kernel(x, factor=0.5, n=x.size)                 # 0.2.x form: 1-D launch derived from n
kernel((blocks,), (256,), x, 0.5, x.size)       # explicit grid and block
kernel.launch(grid, block, x, 0.5, x.size, shared_mem=0, stream=s)
```

- The kernel's parameter list is parsed from the source (``__global__`` functions): pointers
  take GPUArrays (their dtype must match a known pointee type: ``float*`` takes float32, ``__half*``
  float16 ...; ``void*``/``char*`` and unknown types take any), ``None`` (null) or an int address
  (unsafe: nothing is checked); scalars take Python numbers and are range-checked for their C type.
  Arguments are checked before anything reaches the GPU (TypeError/ValueError naming the parameter).
- Compiled for the device's architecture (``-arch=sm_XY``, a CUBIN; PTX for ``compute_XY`` when
  NVRTC is older than the device), with C++ names resolved by NVRTC's name expressions, so
  ``extern "C"`` is optional. Images are cached on disk under ``$PYGPUKIT_CACHE_DIR/nvrtc`` (default
  ``~/.cache/pygpukit/nvrtc``) keyed by a hash of the source, target architecture, options, NVRTC
  version and function name, and in memory for the process.
- Launches run on ``gp.current_stream()`` of the arguments' device unless ``stream=`` names
  another.
- A compile error raises ``NvrtcError`` whose message is NVRTC's log.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from pygpukit import _core, runtime
from pygpukit._jit_signature import _SCALARS, Param, parse_kernels
from pygpukit.array import GPUArray
from pygpukit.errors import NoDeviceError, NvrtcUnavailableError, ReadOnlyError

__all__ = [
    "jit",
    "Kernel",
    "Param",
    "NvrtcError",
    "is_nvrtc_available",
    "get_nvrtc_path",
    "nvrtc_version",
    "parse_kernels",
    "cache_dir",
    "cache_key",
]

BLOCK = 256  # threads per block of the 0.2.x call form
_N_NAMES = ("n", "N", "numel", "size")
_CACHE_FORMAT = "pygpukit-nvrtc-1"


class NvrtcError(RuntimeError):
    """NVRTC rejected the source or the options; the message is the compiler's log."""

    def __init__(self, log: str, *, func: str = "", options: tuple[str, ...] = ()) -> None:
        super().__init__(log)
        self.log = log
        self.func = func
        self.options = options


# ----- the library -------------------------------------------------------------------------------

_lock = threading.Lock()
_status: tuple[bool, str, tuple[int, int], tuple[int, ...]] | None = None


def _load() -> tuple[bool, str, tuple[int, int], tuple[int, ...]]:
    """(ok, path or reason, version, archs), computed once per process."""
    global _status
    got = _status
    if got is None:
        with _lock:
            got = _status
            if got is None:
                from pygpukit.backends.native._libs import nvidia_lib_dirs

                try:
                    path, ver, archs = _core.nvrtc_load(
                        nvidia_lib_dirs("cu13", "cu12", "cuda_nvrtc")
                    )
                    got = (True, path, (int(ver[0]), int(ver[1])), tuple(int(a) for a in archs))
                except Exception as exc:
                    got = (False, str(exc), (0, 0), ())
                _status = got
    return got


def is_nvrtc_available() -> bool:
    """Whether NVRTC can be loaded (env PYGPUKIT_NVRTC_PATH, nvidia-* wheels, system CUDA)."""
    return _load()[0]


def get_nvrtc_path() -> str | None:
    """The path (or soname) NVRTC was loaded from; None when it is not available."""
    ok, path, _, _ = _load()
    return path if ok else None


def nvrtc_version() -> tuple[int, int] | None:
    ok, _, ver, _ = _load()
    return ver if ok else None


def _require() -> tuple[str, tuple[int, int], tuple[int, ...]]:
    ok, path, ver, archs = _load()
    if not ok:
        raise NvrtcUnavailableError(f"gp.jit needs NVRTC, which is not available: {path}")
    return path, ver, archs


# ----- compile cache -----------------------------------------------------------------------------


def cache_dir() -> Path:
    """$PYGPUKIT_CACHE_DIR/nvrtc, else $XDG_CACHE_HOME/pygpukit/nvrtc or ~/.cache/pygpukit/nvrtc."""
    env = os.environ.get("PYGPUKIT_CACHE_DIR")
    if env:
        return Path(env) / "nvrtc"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pygpukit" / "nvrtc"


def cache_key(
    source: str, arch: str, options: tuple[str, ...], version: tuple[int, int], func: str
) -> str:
    """sha256 over everything that changes the compiled image."""
    h = hashlib.sha256()
    for part in (
        _CACHE_FORMAT,
        source,
        arch,
        "\x1f".join(options),
        f"{version[0]}.{version[1]}",
        func,
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _target(
    cap: tuple[int, int], archs: tuple[int, ...], version: tuple[int, int]
) -> tuple[str, bool]:
    """(-arch option, whether it yields a CUBIN) for a device of compute capability ``cap``."""
    cc = cap[0] * 10 + cap[1]
    if cc in archs:
        return f"-arch=sm_{cc}", True
    lower = [a for a in archs if a <= cc]
    if not lower:
        raise RuntimeError(
            f"NVRTC {version[0]}.{version[1]} cannot compile for compute capability "
            f"{cap[0]}.{cap[1]} (it supports sm_{', sm_'.join(map(str, archs))})"
        )
    # Newer device than this NVRTC knows: PTX for the newest virtual arch, JIT-compiled by the
    # driver at load time.
    return f"-arch=compute_{max(lower)}", False


def _user_arch(options: tuple[str, ...]) -> tuple[str, bool] | None:
    for o in options:
        m = re.fullmatch(r"(?:-arch|--gpu-architecture)[= ](\S+)", o)
        if m:
            return o, m.group(1).startswith("sm_")
    return None


_images: dict[str, tuple[bytes, str, str]] = {}  # key -> (image, lowered name, log)


def _read_disk(key: str) -> tuple[bytes, str, str] | None:
    d = cache_dir()
    try:
        meta = json.loads((d / f"{key}.json").read_text())
        image = (d / f"{key}.bin").read_bytes()
    except (OSError, ValueError):
        return None
    if meta.get("format") != _CACHE_FORMAT or len(image) != meta.get("size"):
        return None
    return image, str(meta["lowered"]), str(meta.get("log", ""))


def _write_disk(key: str, image: bytes, lowered: str, log: str) -> Path | None:
    d = cache_dir()
    meta = {"format": _CACHE_FORMAT, "size": len(image), "lowered": lowered, "log": log}
    try:
        d.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".bin", image), (".json", json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key}", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / f"{key}{suffix}")
    except OSError:
        return None  # an unwritable cache costs a recompile next time, nothing else
    return d / f"{key}.bin"


# ----- kernels -----------------------------------------------------------------------------------


class Kernel:
    """A compiled ``__global__`` function. Call as ``kernel(grid, block, *args, shared_mem=0,
    stream=None)``, as ``kernel.launch(...)`` with the same arguments, or in the 0.2.x form
    ``kernel(x, factor=0.5, n=x.size)`` (a 1-D launch of 256-thread blocks covering ``n``, or the
    first array's size)."""

    def __init__(
        self, source: str, func: str, params: tuple[Param, ...], options: tuple[str, ...]
    ) -> None:
        self.source = source
        self.name = func
        self.params = params
        self.options = options
        self.origin = ""  # "compiled", "disk" or "memory": where the last image came from
        self.log = ""
        self.cache_path: Path | None = None
        self._functions: dict[int, tuple[Any, int]] = {}  # device -> (module, CUfunction)
        self._struct = struct.Struct("<" + "".join(_slot(p) for p in params))

    def __repr__(self) -> str:
        sig = ", ".join(
            f"{p.ctype}{'*' if p.pointer else ''} {p.name or ''}".strip() for p in self.params
        )
        return f"<gp.jit Kernel {self.name}({sig})>"

    # -- compiling
    def _function(self, dev: runtime.Device) -> int:
        got = self._functions.get(dev.index)
        if got is not None:
            return got[1]
        _, version, archs = _require()
        props = dev.properties
        cap = (int(props["major"]), int(props["minor"]))
        user = _user_arch(self.options)
        arch_opt, cubin = user if user is not None else _target(cap, archs, version)
        options = self.options if user is not None else (arch_opt, *self.options)
        key = cache_key(self.source, arch_opt, self.options, version, self.name)
        hit = _images.get(key)
        origin = "memory"
        if hit is None:
            hit = _read_disk(key)
            origin = "disk"
        if hit is None:
            ok, image, log, lowered = _core.nvrtc_compile(
                self.source, f"{self.name}.cu", list(options), [f"&{self.name}"], cubin
            )
            if not ok:
                raise NvrtcError(log, func=self.name, options=options)
            hit = (bytes(image), lowered[0], log)
            self.cache_path = _write_disk(key, *hit)
            origin = "compiled"
        elif origin == "disk":
            self.cache_path = cache_dir() / f"{key}.bin"
        _images[key] = hit
        image_b, lowered_name, self.log = hit
        module = _core.CudaModule(dev.index, image_b)
        fn = int(module.function(lowered_name))
        self._functions[dev.index] = (module, fn)
        self.origin = origin
        return fn

    # -- calling
    def __call__(self, *args: Any, shared_mem: int = 0, stream: Any = None, **kwargs: Any) -> None:
        n_named = sum(1 for p in self.params if p.name in kwargs)
        explicit = (
            len(args) >= 2
            and _is_dims(args[0])
            and _is_dims(args[1])
            and len(args) - 2 + n_named == len(self.params)
        )
        if explicit:
            self.launch(args[0], args[1], *args[2:], shared_mem=shared_mem, stream=stream, **kwargs)
            return
        values = self._bind(args, kwargs)
        n = None
        for p, v in zip(self.params, values, strict=True):
            if p.name in _N_NAMES and not p.pointer and isinstance(v, (int, np.integer)):
                n = int(v)
                break
        if n is None:
            n = next((v.size for v in values if isinstance(v, GPUArray)), None)
        if n is None:
            raise TypeError(
                f"{self.name}: cannot derive a launch shape: no parameter named n and no array "
                "argument; call kernel(grid, block, *args)"
            )
        if n <= 0:
            return
        self._launch(((n + BLOCK - 1) // BLOCK, 1, 1), (BLOCK, 1, 1), values, shared_mem, stream)

    def launch(
        self,
        grid: Any,
        block: Any,
        *args: Any,
        shared_mem: int = 0,
        stream: Any = None,
        **kwargs: Any,
    ) -> None:
        """Launch on an explicit grid and block (ints or tuples of 1-3 ints)."""
        g = _dims(self.name, "grid", grid, (2**31 - 1, 65535, 65535))
        b = _dims(self.name, "block", block, (1024, 1024, 64))
        if math.prod(b) > 1024:
            raise ValueError(f"{self.name}: block {b} has {math.prod(b)} threads; at most 1024")
        self._launch(g, b, self._bind(args, kwargs), shared_mem, stream)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        params = self.params
        if len(args) > len(params):
            raise TypeError(
                f"{self.name}: takes {len(params)} arguments, got {len(args)} positional"
            )
        values: list[Any] = list(args)
        missing = []
        for p in params[len(args) :]:
            if p.name is not None and p.name in kwargs:
                values.append(kwargs.pop(p.name))
            else:
                missing.append(p.name or f"#{len(values)}")
                values.append(None)
        for p in params[: len(args)]:
            if p.name in kwargs:
                raise TypeError(f"{self.name}: parameter {p.name} given twice")
        if kwargs:
            raise TypeError(f"{self.name}: no parameter named {', '.join(sorted(kwargs))}")
        if missing:
            raise TypeError(f"{self.name}: missing argument(s) {', '.join(missing)}")
        return values

    def _launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        values: list[Any],
        shared_mem: Any,
        stream: Any,
    ) -> None:
        if (
            isinstance(shared_mem, bool)
            or not isinstance(shared_mem, int)
            or not 0 <= shared_mem < 2**31
        ):
            raise ValueError(
                f"{self.name}: shared_mem must be a byte count >= 0, got {shared_mem!r}"
            )
        dev = self._device(values)
        packed = self._pack(values, dev)
        if stream is None:
            s = runtime.current_stream(dev)
        elif isinstance(stream, runtime.Stream):
            if stream.device != dev.index:
                raise ValueError(
                    f"{self.name}: stream is on device {stream.device}, arguments on {dev}"
                )
            s = stream
        else:
            raise TypeError(f"{self.name}: stream must be a gp.Stream, got {type(stream).__name__}")
        fn = self._function(dev)
        args = (dev.index, fn, grid, block, shared_mem, s.handle, packed)
        pacer = runtime.launch_gate(dev)
        if pacer is None:
            _core.nvrtc_launch(*args)
        else:  # a scheduler context's launch gate (pygpukit.scheduler)
            runtime.gated(pacer, s, _core.nvrtc_launch, *args)

    def _device(self, values: list[Any]) -> runtime.Device:
        dev = None
        for p, v in zip(self.params, values, strict=True):
            if isinstance(v, GPUArray):
                if v._device.type != "cuda":
                    raise ValueError(
                        f"{self.name}: {p.name or 'an argument'} is on {v.device}; "
                        "kernels need CUDA arrays"
                    )
                if dev is None:
                    dev = v._device
                elif v._device is not dev:
                    raise ValueError(
                        f"{self.name}: arguments are on different devices ({dev} and {v.device})"
                    )
        if dev is None:
            dev = runtime.default_device()
            if dev.type != "cuda":
                raise NoDeviceError(f"{self.name}: no CUDA device to launch on")
        return dev

    def _pack(self, values: list[Any], dev: runtime.Device) -> bytes:
        raw = [
            _convert(self.name, i, p, v)
            for i, (p, v) in enumerate(zip(self.params, values, strict=True))
        ]
        try:
            return self._struct.pack(*raw)
        except (struct.error, OverflowError) as exc:
            raise ValueError(f"{self.name}: an argument does not fit its C type ({exc})") from None


def _slot(p: Param) -> str:
    code = "Q" if p.pointer else ("H" if p.code in ("e16", "bf16") else p.code)
    size = 8 if p.pointer else _SCALARS[p.ctype][1]
    return f"{code}{8 - size}x" if size < 8 else code


_INT_RANGES = {
    "b": (-(2**7), 2**7 - 1),
    "B": (0, 2**8 - 1),
    "h": (-(2**15), 2**15 - 1),
    "H": (0, 2**16 - 1),
    "i": (-(2**31), 2**31 - 1),
    "I": (0, 2**32 - 1),
    "q": (-(2**63), 2**63 - 1),
    "Q": (0, 2**64 - 1),
}


def _convert(func: str, i: int, p: Param, v: Any) -> Any:
    """The value struct packs for parameter ``p``, after checking the argument's type."""
    label = f"{func}: parameter {p.name or f'#{i}'} ({p.ctype}{'*' if p.pointer else ''})"
    if p.pointer:
        if v is None:
            return 0
        if isinstance(v, GPUArray):
            ok = p.dtypes
            if ok is not None and v.dtype.name not in ok:
                raise TypeError(f"{label} takes a {' or '.join(ok)} array, got {v.dtype.name}")
            if v.readonly and not p.const_pointee:
                raise ReadOnlyError(
                    f"{label} may write through the pointer but the array is read-only (an "
                    "import of read-only memory); declare it const or pass a copy()"
                )
            return v.data_ptr()
        if isinstance(v, int) and not isinstance(v, bool):
            if not 0 <= v < 2**64:
                raise ValueError(f"{label}: address {v} out of range")
            return v
        raise TypeError(f"{label} takes a GPUArray, None or an int address, got {type(v).__name__}")
    if isinstance(v, GPUArray):
        raise TypeError(f"{label} is a scalar, got a GPUArray")
    if p.code in ("f", "d", "e16", "bf16"):
        if isinstance(v, (bool, np.bool_)) or not isinstance(
            v, (int, float, np.integer, np.floating)
        ):
            raise TypeError(f"{label} takes a number, got {type(v).__name__}")
        if p.code == "e16":
            return int(np.asarray(v, dtype=np.float16).view(np.uint16))
        if p.code == "bf16":
            return int(np.asarray(v, dtype=ml_dtypes.bfloat16).view(np.uint16))
        return float(v)
    if p.code == "?":
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
            return bool(v)
        raise TypeError(f"{label} takes a bool, got {v!r}")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{label} takes an int, got {type(v).__name__}")
    lo, hi = _INT_RANGES[p.code]
    if not lo <= int(v) <= hi:
        raise ValueError(f"{label}: {v} is out of range [{lo}, {hi}]")
    return int(v)


def _is_dims(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return (
        isinstance(v, (tuple, list))
        and 1 <= len(v) <= 3
        and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v)
    )


def _dims(func: str, what: str, v: Any, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    if not _is_dims(v):
        raise TypeError(f"{func}: {what} must be an int or a tuple of 1-3 ints, got {v!r}")
    t = [int(x) for x in (v if isinstance(v, (tuple, list)) else (v,))]
    t += [1] * (3 - len(t))
    for x, lim in zip(t, limits, strict=True):
        if not 1 <= x <= lim:
            raise ValueError(f"{func}: {what} {tuple(t)} must be in [1, {limits}] per dim")
    return (t[0], t[1], t[2])


def jit(
    source: str,
    func: str | None = None,
    name: str | None = None,
    options: Any = (),
) -> Kernel:
    """Compile the ``__global__`` function ``func`` of ``source`` with NVRTC (for the default
    CUDA device now, for other devices at their first launch) and return a ``Kernel``.

    ``func`` may be left out when the source has one ``__global__`` function; ``name`` is the
    same thing under the spelling of the 0.2.x issue (``gp.jit(src, name=...)``). ``options`` are
    NVRTC options (``-arch=sm_90a`` replaces the automatic architecture; ``-DNAME=1``,
    ``-use_fast_math`` ...).
    """
    if not isinstance(source, str) or not source.strip():
        raise TypeError("jit: source must be a non-empty string of CUDA C++")
    if func is not None and name is not None and func != name:
        raise ValueError(f"jit: func={func!r} and name={name!r} disagree; give one")
    want = func if func is not None else name
    if isinstance(options, str):
        options = (options,)
    try:
        opts = tuple(str(o) for o in options)
    except TypeError:
        raise TypeError(f"jit: options must be a sequence of strings, got {options!r}") from None
    kernels = parse_kernels(source)
    if not kernels:
        raise ValueError("jit: source has no __global__ function")
    if want is None:
        if len(kernels) != 1:
            raise ValueError(
                f"jit: source has several __global__ functions ({', '.join(kernels)}); pass func="
            )
        want = next(iter(kernels))
    if want not in kernels:
        raise ValueError(
            f"jit: no __global__ function {want!r} in source (found: {', '.join(kernels)})"
        )
    k = Kernel(source, want, kernels[want], opts)
    _require()
    dev = runtime.default_device()
    if dev.type != "cuda":
        raise NoDeviceError("jit: no CUDA device to compile for")
    k._function(dev)
    return k
