"""gp.jit on the GPU: the README kernel compiles, launches and is right; compile errors carry the
NVRTC log; the disk cache serves a second compile; explicit launch shapes, 2-D blocks, large
dynamic shared memory, C++ (mangled) names, other streams."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu
jitmod = importlib.import_module("pygpukit.jit")
DEV = "cuda:0"

README = """
extern "C" __global__ void scale(float* x, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
"""


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("PYGPUKIT_CACHE_DIR", str(tmp_path))
    jitmod._images.clear()
    yield tmp_path / "nvrtc"
    jitmod._images.clear()


def test_nvrtc_is_available() -> None:
    assert gp.is_nvrtc_available(), jitmod._load()[1]
    path = gp.get_nvrtc_path()
    assert path is not None and "nvrtc" in path
    assert jitmod.nvrtc_version() >= (12, 0)


def test_readme_kernel_compiles_launches_and_is_right(fresh_cache: Path) -> None:
    host = np.arange(1000, dtype=np.float32) - 300.5
    x = gp.from_numpy(host, device=DEV)
    kernel = gp.jit(README, func="scale")
    assert kernel.origin == "compiled"
    assert kernel.cache_path is not None and kernel.cache_path.parent == fresh_cache
    kernel(x, factor=0.5, n=x.size)
    np.testing.assert_array_equal(x.to_numpy(), host * np.float32(0.5))
    # Explicit launch shape: only the first 300 elements (3 blocks of 100 threads, n=300).
    kernel((3,), (100,), x, 4.0, 300)
    want = host * np.float32(0.5)
    want[:300] *= 4
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_second_jit_hits_the_disk_cache(fresh_cache: Path) -> None:
    first = gp.jit(README, "scale")
    assert first.origin == "compiled"
    files = sorted(p.name for p in fresh_cache.iterdir())
    assert len(files) == 2 and files[0].endswith(".bin") and files[1].endswith(".json")
    assert gp.jit(README, "scale").origin == "memory"
    jitmod._images.clear()  # as a new process would start
    second = gp.jit(README, name="scale")
    assert second.origin == "disk" and second.cache_path == first.cache_path
    x = gp.from_numpy(np.ones(70, np.float32), device=DEV)
    second(x, factor=3.0, n=70)
    np.testing.assert_array_equal(x.to_numpy(), np.full(70, 3, np.float32))
    # Other options: another key, another compile.
    assert gp.jit(README, "scale", options=["-DUNUSED=1"]).origin == "compiled"


def test_syntax_error_carries_the_nvrtc_log() -> None:
    bad = 'extern "C" __global__ void broken(float* x) { x[0] = 1.0f }'
    with pytest.raises(gp.NvrtcError) as info:
        gp.jit(bad)
    msg = str(info.value)
    assert msg == info.value.log
    assert "broken.cu" in msg and "error" in msg, msg
    with pytest.raises(jitmod.NvrtcError, match=r"(?i)unrecognized|invalid.option|bogus"):
        gp.jit(README, options=["--bogus-option"])


def test_2d_block_doubles_and_sizes() -> None:
    src = """
    extern "C" __global__ void axpy2d(double* y, const double* x, double a, size_t rows,
                                      unsigned int cols) {
        size_t r = blockIdx.y * blockDim.y + threadIdx.y;
        unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < rows && c < cols) y[r * cols + c] += a * x[r * cols + c];
    }
    """
    rng = np.random.default_rng(0)
    hx, hy = rng.standard_normal((37, 53)), rng.standard_normal((37, 53))
    x, y = gp.from_numpy(hx, device=DEV), gp.from_numpy(hy, device=DEV)
    # Without FMA contraction the kernel rounds a*x and the sum separately, as NumPy does.
    k = gp.jit(src, options=["-fmad=false"])
    k(((53 + 15) // 16, (37 + 15) // 16), (16, 16), y, x, 2.5, 37, 53)
    np.testing.assert_array_equal(y.to_numpy(), hy + 2.5 * hx)
    with pytest.raises(TypeError, match=r"parameter x \(double\*\) takes a float64 array"):
        k((1,), (16, 16), y, y.astype(gp.float32), 2.5, 37, 53)


def test_large_dynamic_shared_memory_and_cpp_names() -> None:
    # No extern "C": the mangled name comes from NVRTC's name expressions.
    src = """
    __global__ void reverse_blocks(int* x, int per_block) {
        extern __shared__ int buf[];
        int base = blockIdx.x * per_block;
        for (int i = threadIdx.x; i < per_block; i += blockDim.x) buf[i] = x[base + i];
        __syncthreads();
        for (int i = threadIdx.x; i < per_block; i += blockDim.x)
            x[base + i] = buf[per_block - 1 - i];
    }
    """
    per_block = 20000  # 80000 bytes of shared memory: needs the opt-in attribute
    host = np.arange(2 * per_block, dtype=np.int32)
    x = gp.from_numpy(host, device=DEV)
    k = gp.jit(src, "reverse_blocks")
    k.launch(2, 256, x, per_block, shared_mem=4 * per_block)
    want = np.concatenate([host[:per_block][::-1], host[per_block:][::-1]])
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_launch_on_another_stream() -> None:
    k = gp.jit(README)
    x = gp.from_numpy(np.ones(4096, np.float32), device=DEV)
    s = gp.Stream(device=0)
    gp.synchronize()
    k(x, factor=2.0, n=4096, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4096, 2, np.float32))
    with gp.stream(s):
        k(x, factor=2.0, n=4096)
    s.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4096, 4, np.float32))
