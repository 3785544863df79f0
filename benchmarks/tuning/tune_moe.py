"""Sweep the grouped expert GEMM's tile (block_m, BLOCK_N, BLOCK_K, warps, stages) on the MoE
benchmark's layer shapes, gated (gate and up) and down products, bf16.

    python benchmarks/tuning/tune_moe.py [--tokens 256 4096]

Prints the median device time of each configuration (L2 flushed); the shipped choice lives in
pygpukit/backends/triton_kernels/moe.py (grouped_config) and pygpukit/models/moe.py
(block_rows).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import ml_dtypes
import numpy as np

import pygpukit as gp
from benchmarks.moe import SHAPES
from pygpukit.backends.triton_kernels import moe as tm
from pygpukit.benchmark.timing import DeviceTimer

CONFIGS = [
    (16, (64, 128, 4, 3)),
    (32, (64, 128, 4, 3)),
    (64, (128, 64, 8, 3)),
    (64, (128, 64, 4, 4)),
    (128, (128, 64, 8, 3)),
    (128, (128, 64, 8, 4)),
    (128, (128, 64, 8, 2)),
    (128, (128, 128, 8, 2)),
    (128, (64, 64, 4, 4)),
    (256, (128, 64, 8, 3)),
]


# Decode (a few rows per expert): 16-row tiles, narrower or deeper weight tiles.
SMALL = [
    (16, (64, 128, 4, 3)),
    (16, (32, 128, 4, 3)),
    (16, (32, 256, 4, 3)),
    (16, (64, 256, 4, 2)),
    (16, (128, 128, 4, 3)),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[256, 4096])
    args = p.parse_args()
    timer = DeviceTimer(0)
    rng = np.random.default_rng(0)
    shipped = tm.grouped_config
    for name, (h, i, e, k) in SHAPES.items():
        w = [
            gp.from_numpy((rng.standard_normal(s, np.float32) * 0.02).astype(ml_dtypes.bfloat16),
                          device="cuda:0")
            for s in ((e, i, h), (e, i, h), (e, h, i))
        ]  # fmt: skip
        for t in args.tokens:
            x = gp.from_numpy(rng.standard_normal((t, h), np.float32).astype(ml_dtypes.bfloat16),
                              device="cuda:0")  # fmt: skip
            logits = gp.from_numpy(rng.standard_normal((t, e), np.float32), device="cuda:0")
            ids, _ = gp.moe_router(logits, k)
            for bm, cfg in SMALL if t <= 16 else CONFIGS:
                tm.grouped_config = lambda _bm, _half, c=cfg: c  # type: ignore[misc]
                rows, be = gp.moe_align(ids, e, bm)
                try:
                    a = gp.moe_linear(x, w[0], rows, be, k, w_up=w[1])
                    t_gu = timer.median_seconds(
                        lambda: gp.moe_linear(x, w[0], rows, be, k, w_up=w[1])  # noqa: B023
                    )
                    t_d = timer.median_seconds(
                        lambda: gp.moe_linear(a, w[2], rows, be, 1)  # noqa: B023
                    )
                except Exception as exc:  # e.g. a tile past the shared memory: say so, go on
                    print(f"{name} T={t} bm={bm} cfg={cfg}: {type(exc).__name__}", flush=True)
                    continue
                flops = 2 * t * k * 3 * h * i
                rate = flops / (t_gu + t_d) / 1e12
                print(f"{name} T={t} bm={bm} cfg={cfg}: gate_up {t_gu * 1e6:.1f} us, down "
                      f"{t_d * 1e6:.1f} us, {rate:.0f} TFLOP/s", flush=True)  # fmt: skip
            tm.grouped_config = shipped


if __name__ == "__main__":
    main()
