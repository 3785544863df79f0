"""Break down the host cost of one small op call on a GPU host (us per call, best of 5).

python benchmarks/tuning/host_profile.py [--op rmsnorm|linear_quantized]

rmsnorm (default) at 1x4096 bf16, through public entry points only: the output allocation, the
cached routing decision (gp.routing.select), the chosen backend's implementation called
directly, the op with and without out=, the same op with each other backend that can serve it
forced (gp.route), and torch's F.rms_norm when torch is importable.

linear_quantized: one bf16 row through gp.linear_quantized with a small fp8 / int4 / nvfp4
weight (256 x 4096: the kernel takes a few microseconds, so back-to-back calls measure the host,
not the queue), beside its decode GEMV's route decision and implementation called directly,
gp.linear on the bf16 weight of the same shape, and torch's F.linear.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import pygpukit as gp

EPS = 1e-6


def per_call(fn: Callable[[], Any], n: int = 5000) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def report(title: str, rows: dict[str, Callable[[], Any]], n: int = 5000) -> None:
    """Print the title, then each row's host time a call (us), then wait for the device."""
    print(title)
    width = max(map(len, rows)) + 2
    for name, fn in rows.items():
        print(f"{name:<{width}} {per_call(fn, n):7.2f} us")
    gp.synchronize()


def _quantized_rows(
    fmt: str, qw: Any, x: Any, out: Any, params: dict[str, Any], dev: Any
) -> dict[str, Callable[[], Any]]:
    """The routed call of one format and its parts: the decode GEMV's route decision and
    implementation."""
    op = f"gemv_{fmt}"
    inputs = (x, qw.data, qw.scales, None)
    backend, impl = gp.routing.select(op, dev, inputs, params)

    def select() -> Any:
        return gp.routing.select(op, dev, inputs, params)

    def direct() -> Any:
        return impl(x, qw.data, qw.scales, None, **params, out=out)

    def routed_out() -> Any:
        return gp.linear_quantized(x, qw, out=out)

    def routed() -> Any:
        return gp.linear_quantized(x, qw)

    return {
        f"{fmt}: gp.routing.select({op}) ({backend})": select,
        f"{fmt}: {backend} implementation (out=)": direct,
        f"{fmt}: gp.linear_quantized(x, qw, out=)": routed_out,
        f"{fmt}: gp.linear_quantized(x, qw)": routed,
    }


def linear_quantized(dev: Any) -> None:
    """Host cost of gp.linear_quantized at one row, by format, and its parts."""
    n, k = 256, 4096
    rng = np.random.default_rng(0)
    xh = rng.standard_normal((1, k)).astype(ml_dtypes.bfloat16)
    wh = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
    x = gp.from_numpy(xh, device=dev)
    w = gp.from_numpy(wh.astype(ml_dtypes.bfloat16), device=dev)
    out = gp.empty((1, n), gp.bfloat16, dev)
    rows: dict[str, Callable[[], Any]] = {
        "gp.linear(x, w) bf16": lambda: gp.linear(x, w),
        "gp.linear(x, w, out=) bf16": lambda: gp.linear(x, w, out=out),
    }
    for fmt in ("fp8", "int4", "nvfp4"):
        qw = gp.quantize_weight(wh, fmt, device=dev)
        params: dict[str, Any] = (
            {"block": qw.block} if fmt == "fp8"
            else {"group": qw.block} if fmt == "int4"
            else {"global_scale": qw.global_scale}
        )  # fmt: skip
        gp.linear_quantized(x, qw, out=out)
        rows.update(_quantized_rows(fmt, qw, x, out, params, dev))
    try:
        import torch

        tx = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        tw = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        rows["torch F.linear bf16"] = lambda: torch.nn.functional.linear(tx, tw)
    except ImportError:
        pass
    report(f"linear_quantized 1x{k} bf16 x, weight {n}x{k}", rows, 2000)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", choices=("rmsnorm", "linear_quantized"), default="rmsnorm")
    args = ap.parse_args(argv)
    if not gp.is_cuda_available():
        print("host_profile: no CUDA device")
        return 1
    dev = gp.device("cuda:0")
    if args.op == "linear_quantized":
        linear_quantized(dev)
        return 0
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
    report(f"rmsnorm 1x4096 bf16 runs on {backend} by default", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
