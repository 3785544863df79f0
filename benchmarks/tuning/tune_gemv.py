"""Sweep the dense decode GEMV's tile (output columns a program, warps, K tile) on the decode
products of the benchmark models, as the engine runs them: one row of bf16 x, chains of 16
products with distinct weights captured in one CUDA graph and replayed back to back, inside
constant_weights() (each program loads its first weight tile before it waits on the kernel
before, at every shape: gemv_dense.early_tile is held to True, since a chain of GEMVs has no
decode attention ahead of a product; programmatic dependent launch on sm_90+).

    python benchmarks/tuning/tune_gemv.py [--shapes 2048x8192 4096x12288 ...] [--reps 20]

A shape is NxK (x [1, K] @ W[N, K]^T) or gNxK for the gated form (W the stacked [Wg; Wu] of
2N rows). With --norm the products are gp.rmsnorm_linear's fused kernel (the RMSNorm of x
plus a residual read into the GEMV), and the first line of each shape is the two-kernel chain
it replaces (rmsnorm with the residual, then the GEMV at its shipped tile). Prints the device
time of one product and its % of the device copy rate on the weight bytes per configuration,
best first; the shipped tiles are gemv_dense.tile (pygpukit/backends/triton_kernels/
gemv_dense.py).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

import pygpukit as gp
from pygpukit import runtime
from pygpukit.backends._support.weights import constant_weights
from pygpukit.backends.triton_kernels import gemv_dense
from pygpukit.benchmark.timing import DeviceTimer, replay_seconds
from pygpukit.graphs import CUDAGraph

# The decode products of the Llama-3.2-1B and Qwen3-8B shapes: qkv, output, gate/up, down.
SHAPES = [
    "3072x2048", "2048x2048", "g8192x2048", "2048x8192",
    "6144x4096", "4096x4096", "g12288x4096", "4096x12288",
]  # fmt: skip
# --norm: the products an RMSNorm precedes in the engine (qkv, lm_head) of the two shapes.
NORM_SHAPES = ["3072x2048", "128256x2048", "6144x4096", "151936x4096"]
CHAIN = 16


def _parse(shape: str) -> tuple[int, int, bool]:
    gated = shape.startswith("g")
    n, k = (int(v) for v in shape.lstrip("g").split("x"))
    return n, k, gated


def _time(
    n: int, k: int, gated: bool, tile: tuple[int, int, int] | None, reps: int, norm: bool = False
) -> float:
    """Seconds per product of a graph-replayed chain of CHAIN products under ``tile``; with
    norm the fused rmsnorm + product (tile None: rmsnorm then the product, two kernels)."""
    rng = np.random.default_rng(0)
    rows = 2 * n if gated else n
    x = gp.from_numpy(rng.standard_normal((1, k)).astype(np.float32), device="cuda:0")
    x = x.astype("bfloat16")
    base = gp.from_numpy(
        (rng.standard_normal((rows, k)) / np.sqrt(k)).astype(np.float32), device="cuda:0"
    ).astype("bfloat16")
    ws = [gp.mul(base, float(i + 1)) for i in range(CHAIN)]  # distinct weights: no L2 reuse
    plain: Callable[..., object] = gemv_dense.linear_silu_mul if gated else gemv_dense.gemv
    fn = plain
    if norm:
        r = gp.from_numpy(rng.standard_normal((1, k)).astype(np.float32), device="cuda:0")
        r, gw = r.astype("bfloat16"), gp.ones((k,), "bfloat16", device="cuda:0")

        def two_kernels(x: gp.GPUArray, w: gp.GPUArray) -> object:
            h, _ = gp.rmsnorm(x, gw, 1e-6, residual=r)
            return plain(h, w)

        def fused(x: gp.GPUArray, w: gp.GPUArray) -> object:
            return gemv_dense.rmsnorm_linear(x, gw, w, None, r, eps=1e-6)

        fn = two_kernels if tile is None else fused

    old, old_early = gemv_dense.tile, gemv_dense.early_tile
    if tile is not None:
        gemv_dense.tile = lambda *_shape: tile  # type: ignore[assignment]
    gemv_dense.early_tile = lambda *_product: True  # type: ignore[assignment]
    try:
        with constant_weights():
            for w in ws:  # compile outside the capture
                fn(x, w)
            g = CUDAGraph("cuda:0")
            with g.capture():
                for w in ws:
                    fn(x, w)
    finally:
        gemv_dense.tile, gemv_dense.early_tile = old, old_early  # type: ignore[assignment]
    return replay_seconds(g, runtime.current_stream(g.device), reps) / CHAIN


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=None, help="default: SHAPES (NORM_SHAPES)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--block-n", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--warps", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--block-k", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--norm", action="store_true", help="gp.rmsnorm_linear's fused kernel")
    args = p.parse_args(argv)
    if args.shapes is None:
        args.shapes = NORM_SHAPES if args.norm else SHAPES
    if args.norm and any(_parse(s)[2] for s in args.shapes):
        p.error("--norm: the fused kernel serves dense (not gated) products only")
    copy = DeviceTimer(0).copy_rate()
    print(f"device copy rate {copy:.0f} GB/s")
    for shape in args.shapes:
        n, k, gated = _parse(shape)
        nbytes = (2 * n if gated else n) * k * 2
        shipped = gemv_dense.tile(k, gated, n, args.norm)
        got = []
        grid = list(itertools.product(args.block_n, args.warps, args.block_k))
        if shipped not in grid:  # the shipped tile is always timed (it may lie off the grid)
            grid.append(shipped)
        for bn, warps, bk in grid:
            if bk > max(512, 1 << (k - 1).bit_length()):
                continue
            t = _time(n, k, gated, (bn, warps, bk), args.reps, args.norm)
            got.append((t, (bn, warps, bk)))
        got.sort()
        print(f"{shape} ({nbytes / 1e6:.1f} MB), shipped tile {shipped}:")
        if args.norm:
            t = _time(n, k, gated, None, args.reps, True)
            print(f"  rmsnorm, then the GEMV:           {t * 1e6:7.2f} us (two kernels)")
        shown = got[:6] + [g for g in got[6:] if g[1] == shipped]
        for t, cfg in shown:
            mark = "  <- shipped" if cfg == shipped else ""
            print(
                f"  block_n {cfg[0]} warps {cfg[1]} block_k {cfg[2]}: {t * 1e6:7.2f} us "
                f"{100 * nbytes / t / 1e9 / copy:5.1f}% of copy{mark}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
