"""Sweep of the deterministic mode's fixed-tile GEMM (pygpukit/backends/triton_kernels/matmul.py).

    python benchmarks/tuning/tune_fixed_gemm.py [--m 1 8]

Per configuration (BLOCK_N x K_CHUNK x NUM_STAGES x BLOCK_K): gp.linear under the mode at the
Llama-3.2-1B projections (bf16, device time, L2 flushed), weighted by how many of each one decode
step runs, against cuBLASLt (the default mode) in the same run. The tiles set the mode's bits: a
change of the shipped values changes its results (never their accuracy).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

import pygpukit as gp
from pygpukit.backends.triton_kernels import matmul as tm
from pygpukit.benchmark.timing import DeviceTimer

# (K, N, count per decode step) of the Llama-3.2-1B shape: qkv, o, gate and up, down, lm_head.
SHAPES = [(2048, 3072, 16), (2048, 2048, 16), (2048, 8192, 32), (8192, 2048, 16), (2048, 128256, 1)]


def per_step_us(timer: DeviceTimer, m: int, det: bool) -> tuple[float, list[float]]:
    total, parts = 0.0, []
    with gp.deterministic(det):
        for k, n, count in SHAPES:
            x = gp.asarray(np.random.default_rng(0).standard_normal((m, k)), gp.bfloat16, "cuda:0")
            w = gp.asarray(np.random.default_rng(1).standard_normal((n, k)), gp.bfloat16, "cuda:0")

            def call(x: gp.GPUArray = x, w: gp.GPUArray = w) -> None:
                gp.linear(x, w)

            t = timer.median_seconds(call, rounds=20)
            total += t * count
            parts.append(round(t * 1e6, 1))
    return total * 1e6, parts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, nargs="+", default=[1])
    args = p.parse_args(argv)
    timer = DeviceTimer(0)
    for m in args.m:
        per_step_us(timer, m, False)  # warm-up
        base, parts = per_step_us(timer, m, False)
        print(f"M={m} cuBLASLt: {base:.0f} us a step {parts}", flush=True)
        for bn, kc, st, bk in itertools.product((32, 64, 128), (256, 512, 1024), (3, 4), (64, 128)):
            if kc % bk:
                continue
            tm.BLOCK_N, tm.K_CHUNK, tm.NUM_STAGES, tm.BLOCK_K = bn, kc, st, bk
            t, parts = per_step_us(timer, m, True)
            print(f"M={m} BN{bn} KC{kc} st{st} BK{bk}: {t:.0f} us ({t / base:.3f}x) {parts}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
