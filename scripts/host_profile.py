"""Break down the host cost of one small op call on a GPU host (us per call, best of 5).

python scripts/host_profile.py
"""

from __future__ import annotations

import timeit

import ml_dtypes
import numpy as np

import pygpukit as gp
from pygpukit.ops._dispatch import run
from pygpukit.routing.select import select


def per_call(fn: object, n: int = 5000) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6  # type: ignore[arg-type]


def main() -> None:
    dev = gp.device("cuda:0")
    rng = np.random.default_rng(0)
    x = gp.from_numpy(rng.standard_normal((1, 4096)).astype(ml_dtypes.bfloat16), device=dev)
    w = gp.from_numpy(rng.standard_normal(4096).astype(ml_dtypes.bfloat16), device=dev)
    out = gp.empty_like(x)
    gp.rmsnorm(x, w, 1e-6, out=out)
    _, impl = select("rmsnorm", dev, (x, w), {"eps": 1e-6})
    rows = {
        "gp.empty((1,4096), bf16)": lambda: gp.empty((1, 4096), gp.bfloat16, dev),
        "routing select (cached)": lambda: select("rmsnorm", dev, (x, w), {"eps": 1e-6}),
        "triton launcher rmsnorm(out=)": lambda: impl(x, w, eps=1e-6, out=out),
        "run('rmsnorm', out=)": lambda: run("rmsnorm", (x, w), {"eps": 1e-6}, out=out),
        "gp.rmsnorm(x, w, out=)": lambda: gp.rmsnorm(x, w, 1e-6, out=out),
        "gp.rmsnorm(x, w)": lambda: gp.rmsnorm(x, w, 1e-6),
    }
    # The launch alone, and the native launcher alone, for the same contiguous rmsnorm kernel.
    import triton.language as tl

    from pygpukit.triton_kernels import driver, norm

    kernel = norm._rms_contig_kernel
    consts = (("HAS_RES", False), ("CT", tl.float32), ("BLOCK_M", 1), ("BLOCK_N", 4096))
    args = (x, w, x, out, out, 1, 4096, 1e-6)

    def launch_only() -> None:
        driver.launch(kernel, (1,), *args, **dict(consts), num_warps=8)

    launch_only()
    s = gp.current_stream(dev).handle
    c = (*consts, ("num_warps", 8))

    def native_only() -> None:
        driver._native_fast.launch(id(kernel), 0, s, (1, 1, 1), args, c)

    rows["driver.launch (fast path)"] = launch_only
    rows["TritonFastPath.launch only"] = native_only
    try:
        import torch

        tx = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
        tw = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        rows["torch F.rms_norm"] = lambda: torch.nn.functional.rms_norm(tx, (4096,), tw, 1e-6)
    except ImportError:
        pass
    for name, fn in rows.items():
        print(f"{name:<34} {per_call(fn):7.2f} us")
    gp.synchronize()


if __name__ == "__main__":
    main()
