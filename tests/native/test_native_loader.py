"""Finding cuBLASLt and NVRTC, and what routing says when they (or the driver) are missing.

Runs everywhere: without the libraries the error must name every place searched; with them
(the GPU machine) a bogus $PYGPUKIT_*_PATH must not stop the search.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from _routes import native_impl

import pygpukit as gp
from pygpukit import _core, routing
from pygpukit.backends.native import _libs as native
from pygpukit.backends.native import matmul as native_matmul

jitmod = importlib.import_module("pygpukit.jit")


LIBS = {
    "cublaslt": (_core.cublaslt_load, _core.cublaslt_loaded, "PYGPUKIT_CUBLASLT_PATH", "cublas"),
    "nvrtc": (_core.nvrtc_load, _core.nvrtc_loaded, "PYGPUKIT_NVRTC_PATH", "cuda_nvrtc"),
}


@pytest.mark.parametrize("lib", list(LIBS))
def test_missing_library_error_names_every_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lib: str
) -> None:
    load, loaded, env, wheel = LIBS[lib]
    soname = "libcublasLt.so" if lib == "cublaslt" else "libnvrtc.so"
    if loaded() is not None:
        pytest.skip("already loaded in this process (the search runs once)")
    bogus = str(tmp_path / "nope" / f"{soname}.13")
    wheel_dir = tmp_path / "wheel_lib"
    wheel_dir.mkdir()
    monkeypatch.setenv(env, bogus)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    # The real wheel directories after the empty one: on a GPU machine the library found is the
    # one the backend would load anyway.
    extra = [str(wheel_dir), *native.nvidia_lib_dirs("cu13", "cu12", wheel)]
    try:
        path, *_ = load(extra)
    except gp.CudaError as exc:
        msg = str(exc)
        assert exc.name == "LIBRARY_NOT_FOUND"
        order = [
            f"{bogus} (no such file)",
            f"{wheel_dir}/{soname}.13 (no such file)",
            f"{tmp_path}/cuda/lib64/{soname}.13 (no such file)",
            f"/usr/local/cuda/lib64/{soname}.13",
            f"{soname}.13 (dlopen failed: ",
            f"{soname}.12 (dlopen failed: ",
        ]
        pos = [msg.find(s) for s in order]
        assert all(p >= 0 for p in pos), msg
        assert pos == sorted(pos), msg
        assert env in msg and "pip install" in msg
    else:
        # A GPU machine: the search went on past the bogus variable to a real library.
        assert path != bogus and soname in path


def test_wheel_lib_dirs_are_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for pkg in ("cu13", "cublas", "cuda_nvrtc", "cudnn"):
        (tmp_path / "nvidia" / pkg / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    got = native.nvidia_lib_dirs("cu13", "cu12", "cublas")
    want = [os.path.realpath(tmp_path / "nvidia" / p / "lib") for p in ("cu13", "cublas")]
    assert [d for d in got if d.startswith(os.path.realpath(tmp_path))] == want


def test_jit_without_nvrtc_or_device_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    src = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'
    monkeypatch.setattr(jitmod, "_status", (False, "searched: here; there", (0, 0), ()))
    assert gp.is_nvrtc_available() is False and gp.get_nvrtc_path() is None
    with pytest.raises(RuntimeError, match=r"gp\.jit needs NVRTC, which is not available: se"):
        gp.jit(src)
    # Source errors come first, before any library or device is needed.
    with pytest.raises(ValueError, match="no __global__ function 'nope'"):
        gp.jit(src, func="nope")


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the CPU-only machine's reasons")
def test_routing_explains_native_without_a_driver() -> None:
    a = gp.from_numpy(np.ones((2, 2), np.float32), device="cpu")
    why = dict(routing.explain("matmul", a, a).candidates)
    assert any("no CUDA driver" in r for r in why["native"]), why


def test_native_lookup_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_cublaslt", (False, "cuBLASLt could not be loaded; searched X"))
    fn, why = native_impl("matmul")
    assert fn is None and "cuBLASLt is not available: cuBLASLt could not be loaded" in why
    monkeypatch.setattr(native, "_cublaslt", (True, "/x/libcublasLt.so.13"))
    fn, why = native_impl("linear")
    assert fn is native_matmul.linear and why == ""
    fn, why = native_impl("rmsnorm")
    if importlib.util.find_spec("_pygpukit_native") is None:
        assert fn is None and "native extension is not built" in why
