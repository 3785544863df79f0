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
    # The launch alone, and the C launcher alone, for the same contiguous rmsnorm kernel.
    import triton.language as tl

    from pygpukit.triton_kernels import driver, norm

    def launch_only() -> None:
        driver.launch(
            norm._rms_contig_kernel,
            (1,),
            x,
            w,
            x,
            out,
            out,
            1,
            4096,
            1e-6,
            HAS_RES=False,
            CT=tl.float32,
            BLOCK_M=1,
            BLOCK_N=4096,
            num_warps=8,
        )

    launch_only()
    fast = next(f for f in driver._fast_cache.values() if f is not None)
    s = gp.current_stream(dev).handle
    vals = (
        x.data_ptr(),
        w.data_ptr(),
        x.data_ptr(),
        out.data_ptr(),
        out.data_ptr(),
        1,
        4096,
        1e-6,
        *fast.tail,
    )

    def c_only() -> None:
        fast.c_launch(
            1,
            1,
            1,
            s,
            fast.function,
            fast.coop,
            fast.pdl,
            None,
            None,
            fast.packed,
            None,
            None,
            None,
            *vals,
        )

    rows["driver.launch (fast path)"] = launch_only
    rows["C launcher only"] = c_only
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
