"""gp.jit's host side, on any machine: signature parsing, argument binding, checks and packing,
launch shapes, the cache key and the target architecture. Compiling and launching are GPU tests
(test_nvrtc_jit.py)."""

from __future__ import annotations

import importlib
import struct
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp

jitmod = importlib.import_module("pygpukit.jit")
Kernel, Param, parse_kernels = jitmod.Kernel, jitmod.Param, jitmod.parse_kernels

README = """
extern "C" __global__ void scale(float* x, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
"""


def test_readme_kernel() -> None:
    k = parse_kernels(README)
    assert k == {
        "scale": (
            Param("x", "float", True, "P"),
            Param("factor", "float", False, "f"),
            Param("n", "int", False, "i"),
        )
    }
    assert k["scale"][0].dtypes == ("float32",)


def test_declaration_forms() -> None:
    src = """
    // __global__ void commented_out(int x)
    /* __global__ void also_not(int) */
    #include <cuda_fp16.h>
    extern "C" {
    __global__ void __launch_bounds__(256, 2) a(const float* __restrict__ x, unsigned int n,
                                                 size_t m, long long q, unsigned char c) {}
    __global__ void b(void) {}
    }
    extern "C" __global__ __launch_bounds__(128) void c(__half* h, __nv_bfloat16 s, bool f,
                                                        double d, float y[], void* raw, int) {}
    static __global__ void d(T* templated, const int& ref_is_rejected_only_when_used) {}
    """
    with pytest.raises(ValueError, match="is a reference"):
        parse_kernels(src)
    k = parse_kernels(src.replace("const int& ref_is_rejected_only_when_used", "short s"))
    assert list(k) == ["a", "b", "c", "d"]
    a = k["a"]
    assert [(p.name, p.ctype, p.pointer, p.code) for p in a] == [
        ("x", "float", True, "P"),
        ("n", "unsigned int", False, "I"),
        ("m", "size_t", False, "Q"),
        ("q", "long long", False, "q"),
        ("c", "unsigned char", False, "B"),
    ]
    assert k["b"] == ()
    c = k["c"]
    assert [(p.name, p.code) for p in c] == [
        ("h", "P"),
        ("s", "bf16"),
        ("f", "?"),
        ("d", "d"),
        ("y", "P"),
        ("raw", "P"),
        (None, "i"),
    ]
    assert c[0].dtypes == ("float16",) and c[5].dtypes is None  # void* takes any array
    assert k["d"][0].dtypes is None  # unknown pointee: any array


def test_by_value_structs_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"parameter v has type 'float4' passed by value"):
        parse_kernels('extern "C" __global__ void k(float4 v) {}')


def _kernel(src: str = README, func: str = "scale") -> Any:
    return Kernel(src, func, parse_kernels(src)[func], ())


def _capture(monkeypatch: pytest.MonkeyPatch, k: Any) -> list[Any]:
    got: list[Any] = []

    def fake(grid: Any, block: Any, values: Any, shared: Any, stream: Any) -> None:
        got.append((grid, block, k._pack(values, None), shared, stream))

    monkeypatch.setattr(k, "_launch", fake)
    return got


def test_call_forms_and_launch_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    k = _kernel()
    got = _capture(monkeypatch, k)
    x = gp.from_numpy(np.ones(1000, np.float32), device="cpu")
    k(x, factor=0.5, n=x.size)  # 0.2.x form: n gives the 1-D shape
    grid, block, packed, _, _ = got[-1]
    assert grid == (4, 1, 1) and block == (256, 1, 1)
    assert struct.unpack("<Qf4xi4x", packed) == (x.data_ptr(), 0.5, 1000)
    k(x, 2.0, 10)
    assert got[-1][0] == (1, 1, 1)
    k.launch((3,), 128, x, 0.5, 10, shared_mem=64)
    assert got[-1][:2] == ((3, 1, 1), (128, 1, 1)) and got[-1][3] == 64
    k((2, 2), (16, 16), x, factor=1.0, n=7)  # explicit form, recognised by argument count
    assert got[-1][:2] == ((2, 2, 1), (16, 16, 1))
    k(x, factor=0.5, n=0)  # nothing to do
    assert len(got) == 4


def test_launch_shape_from_the_first_array(monkeypatch: pytest.MonkeyPatch) -> None:
    src = 'extern "C" __global__ void fill(float* y, float v) {}'
    k = _kernel(src, "fill")
    got = _capture(monkeypatch, k)
    y = gp.from_numpy(np.ones(513, np.float32), device="cpu")
    k(y, v=1.0)
    assert got[-1][0] == (3, 1, 1)


def test_argument_errors_name_the_parameter() -> None:
    k = _kernel()
    x = gp.from_numpy(np.ones(4, np.float32), device="cpu")
    xb = gp.from_numpy(np.ones(4, ml_dtypes.bfloat16), device="cpu")
    with pytest.raises(TypeError, match=r"scale: missing argument\(s\) n"):
        k(x, 0.5)
    with pytest.raises(TypeError, match="scale: no parameter named bogus"):
        k(x, 0.5, 4, bogus=1)
    with pytest.raises(TypeError, match="scale: parameter factor given twice"):
        k(x, 0.5, factor=0.5, n=4)
    with pytest.raises(
        TypeError, match=r"scale: parameter x \(float\*\) takes a float32 array, got bfloat16"
    ):
        k._pack([xb, 0.5, 4], None)
    with pytest.raises(TypeError, match=r"parameter n \(int\) takes an int, got float"):
        k._pack([x, 0.5, 4.0], None)
    with pytest.raises(ValueError, match=r"parameter n \(int\): 4294967296 is out of range"):
        k._pack([x, 0.5, 2**32], None)
    with pytest.raises(
        TypeError, match=r"parameter factor \(float\) takes a number, got GPUArray|is a scalar"
    ):
        k._pack([x, x, 4], None)
    with pytest.raises(
        TypeError, match=r"parameter x \(float\*\) takes a GPUArray, None or an int"
    ):
        k._pack(["x", 0.5, 4], None)
    with pytest.raises(ValueError, match="does not fit its C type"):
        k._pack([x, 1e300, 4], None)
    with pytest.raises(ValueError, match=r"block \(2048, 1, 1\) must be in"):
        k.launch(1, 2048, x, 0.5, 4)
    with pytest.raises(ValueError, match="has 2048 threads"):
        k.launch(1, (64, 32), x, 0.5, 4)
    with pytest.raises(TypeError, match="grid must be an int or a tuple"):
        k.launch("1", 1, x, 0.5, 4)
    assert k._pack([None, 0, 4], None)[:8] == bytes(8)  # None is a null pointer


def test_half_and_bool_scalars_pack_their_bits() -> None:
    src = 'extern "C" __global__ void k(__half a, __nv_bfloat16 b, bool c, unsigned char d) {}'
    k = _kernel(src, "k")
    packed = k._pack([1.5, -2.0, True, 255], None)
    a, b, c, d = struct.unpack("<H6xH6x?7xB7x", packed)
    assert a == int(np.float16(1.5).view(np.uint16))
    assert b == int(np.asarray(-2.0, ml_dtypes.bfloat16).view(np.uint16))
    assert c is True and d == 255


def test_cache_key_covers_every_input() -> None:
    base = ("src", "-arch=sm_90", ("-O3",), (13, 0), "scale")
    key = jitmod.cache_key(*base)
    assert len(key) == 64 and key == jitmod.cache_key(*base)
    for i, alt in enumerate(["src2", "-arch=sm_89", ("-O2",), (12, 8), "other"]):
        changed = list(base)
        changed[i] = alt
        assert jitmod.cache_key(*changed) != key


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("PYGPUKIT_CACHE_DIR", str(tmp_path))
    assert jitmod.cache_dir() == tmp_path / "nvrtc"
    monkeypatch.delenv("PYGPUKIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert jitmod.cache_dir() == tmp_path / "x" / "pygpukit" / "nvrtc"


def test_target_architecture() -> None:
    archs = (75, 80, 86, 89, 90, 100, 120)
    assert jitmod._target((9, 0), archs, (13, 0)) == ("-arch=sm_90", True)
    # A device newer than this NVRTC: PTX for the newest arch below it, JIT-compiled by the driver.
    assert jitmod._target((12, 1), archs, (13, 0)) == ("-arch=compute_120", False)
    with pytest.raises(RuntimeError, match=r"cannot compile for compute capability 7\.0"):
        jitmod._target((7, 0), archs, (13, 0))
    assert jitmod._user_arch(("-DX=1", "-arch=sm_90a")) == ("-arch=sm_90a", True)
    assert jitmod._user_arch(("--gpu-architecture=compute_90",)) == (
        "--gpu-architecture=compute_90",
        False,
    )
    assert jitmod._user_arch(("-O3",)) is None
