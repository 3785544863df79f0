"""Batch-1 decode attention at a fixed length across cache capacities: keys a split by the
length (the shipped rule) and by the capacity.

    python benchmarks/tuning/decode_capacity.py [--caps 272 2048 8192 32768]
        [--lens 200 1000 2000 4000 8000] [--dims 64 128] [--layers 16]

Hq 32 / Hkv 8, bf16, one query token, contiguous caches of random values. A CUDA graph of
--layers calls, each over its own layer's cache (so the K/V bytes come from HBM as in a decode
step), replayed with the L2 flushed before each round; the time is a call's share of the
median replay. Each (capacity, length) runs both rules on the same caches, the split rule
switched by `_support/scratch.LENGTH_CHUNKS`: what a cache much longer than its sequence (a
chat session's cache spans the model's context) costs when the capacity sets the splits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pygpukit as gp
from pygpukit import runtime
from pygpukit.backends._support import scratch
from pygpukit.backends.triton_kernels import attention_decode as ad
from pygpukit.benchmark.timing import DeviceTimer
from pygpukit.models.step_graph import capture

HEADS, KV_HEADS = 32, 8


def _split(length: int, cap: int, d: int, by_length: bool) -> str:
    """'splits x keys' the plan gives this length under either rule."""
    shipped = scratch.LENGTH_CHUNKS
    scratch.LENGTH_CHUNKS = by_length
    try:
        pl = ad.decode_plan(1, HEADS, KV_HEADS, 1, d, cap, True, runtime.sm_count(gp.device(0)))
    finally:
        scratch.LENGTH_CHUNKS = shipped
    ks = scratch.KeySplits(pl.splits, pl.chunk, pl.floor, pl.solo)
    keys = scratch.split_chunk(length, ks, pl.block_n)
    return f"{-(-length // keys)} x {keys}"


def _call_us(timer: DeviceTimer, args: argparse.Namespace, q: Any, kc: list[Any], vc: list[Any],
             lens: Any, outs: list[Any]) -> float:  # fmt: skip
    """A call's share, in microseconds, of the median replay of a graph of one call a layer."""
    dev = q.device

    def body() -> None:
        for i in range(args.layers):
            gp.sdpa_decode(q, kc[i], vc[i], lens, out=outs[i])

    graph = capture(dev, body, "attention chain")
    stream = runtime.current_stream(dev)
    t = timer.median_seconds(lambda: graph.replay(stream), rounds=args.rounds)
    return t / args.layers * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--caps", type=int, nargs="+", default=[272, 2048, 8192, 32768])
    p.add_argument("--lens", type=int, nargs="+", default=[200, 1000, 2000, 4000, 8000])
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    if min(args.caps + args.lens + args.dims) < 1 or args.layers < 1 or args.rounds < 1:
        p.error("capacities, lengths, head dims, --layers and --rounds must be positive")
    if not gp.is_cuda_available():
        print("benchmarks/tuning/decode_capacity.py: no CUDA device; nothing to time")
        return 0
    timer = DeviceTimer(0)
    dev = gp.device("cuda:0")
    rng = np.random.default_rng(0)
    shipped = scratch.LENGTH_CHUNKS
    print("head dim | cache slots | keys | by the length us (splits x keys) | "
          "by the capacity us (splits x keys) | length / capacity")  # fmt: skip
    try:
        for d in args.dims:
            q = gp.from_numpy(rng.standard_normal((1, HEADS, 1, d), np.float32), dev, gp.bfloat16)
            outs = [gp.empty((1, HEADS, 1, d), gp.bfloat16, dev) for _ in range(args.layers)]
            for cap in args.caps:
                shape = (1, KV_HEADS, cap, d)
                kc = [gp.from_numpy(rng.standard_normal(shape, np.float32), dev, gp.bfloat16)
                      for _ in range(args.layers)]  # fmt: skip
                vc = [gp.from_numpy(rng.standard_normal(shape, np.float32), dev, gp.bfloat16)
                      for _ in range(args.layers)]  # fmt: skip
                for length in (n for n in args.lens if n <= cap):
                    lens = gp.from_numpy(np.array([length], np.int32), dev)
                    us = {}
                    for by_length in (True, False):
                        scratch.LENGTH_CHUNKS = by_length
                        us[by_length] = _call_us(timer, args, q, kc, vc, lens, outs)
                    by_len, by_cap = _split(length, cap, d, True), _split(length, cap, d, False)
                    print(f"{d} | {cap} | {length} | {us[True]:.2f} ({by_len}) | "
                          f"{us[False]:.2f} ({by_cap}) | {us[True] / us[False]:.3f}",
                          flush=True)  # fmt: skip
    finally:
        scratch.LENGTH_CHUNKS = shipped
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
