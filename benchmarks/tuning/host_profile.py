"""Break down the host cost of one small op call on a GPU host (us per call, best of 5).

python benchmarks/tuning/host_profile.py

rmsnorm at 1x4096 bf16, through public entry points only: the output allocation, the cached
routing decision (gp.routing.select), the chosen backend's implementation called directly, the
op with and without out=, the same op with each other backend that can serve it forced
(gp.route), and torch's F.rms_norm when torch is importable.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import pygpukit as gp

EPS = 1e-6


def per_call(fn: Callable[[], Any], n: int = 5000) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def main() -> int:
    if not gp.is_cuda_available():
        print("host_profile: no CUDA device")
        return 1
    dev = gp.device("cuda:0")
    rng = np.random.default_rng(0)
    x = gp.from_numpy(rng.standard_normal((1, 4096)).astype(ml_dtypes.bfloat16), device=dev)
    w = gp.from_numpy(rng.standard_normal(4096).astype(ml_dtypes.bfloat16), device=dev)
    out = gp.empty_like(x)
    gp.rmsnorm(x, w, EPS, out=out)
    params = {"eps": EPS}
    backend, impl = gp.routing.select("rmsnorm", dev, (x, w), params)
    rows: dict[str, Callable[[], Any]] = {
        "gp.empty((1,4096), bf16)": lambda: gp.empty((1, 4096), gp.bfloat16, dev),
        "gp.routing.select (cached)": lambda: gp.routing.select("rmsnorm", dev, (x, w), params),
        f"{backend} implementation (out=)": lambda: impl(x, w, eps=EPS, out=out),
        "gp.rmsnorm(x, w, out=)": lambda: gp.rmsnorm(x, w, EPS, out=out),
        "gp.rmsnorm(x, w)": lambda: gp.rmsnorm(x, w, EPS),
    }
    for name, why in gp.routing.explain("rmsnorm", x, w, eps=EPS).candidates:
        if name == backend or why:
            continue

        def forced(name: str = name) -> None:
            with gp.route(rmsnorm=name):
                gp.rmsnorm(x, w, EPS, out=out)

        forced()
        rows[f"gp.rmsnorm(out=), {name} forced"] = forced
    try:
        import torch

        tx = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
        tw = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        rows["torch F.rms_norm"] = lambda: torch.nn.functional.rms_norm(tx, (4096,), tw, EPS)
    except ImportError:
        pass
    print(f"rmsnorm 1x4096 bf16 runs on {backend} by default")
    for name, fn in rows.items():
        print(f"{name:<38} {per_call(fn):7.2f} us")
    gp.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
