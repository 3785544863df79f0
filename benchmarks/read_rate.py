"""The pure-read ceiling: how fast one kernel can read a weight's bytes, by size, against the
device copy rate (pygpukit.benchmark.timing, L2 flushed before each round).

    python benchmarks/read_rate.py [--json results.json] [--rounds 30]

A decode GEMV must read its weight once; for a weight of tens of megabytes the launch and the
ramp to full bandwidth are a visible share of the time. This times a kernel that does nothing
but read (int32 words, each program summing a contiguous chunk into one value, a few bytes
written) at the byte counts of the decode GEMV's formats at K4096 N14336 and K8192 N29568, over
a sweep of chunk sizes, and reports the fastest as the ceiling any GEMV of those bytes can
reach. Without a GPU the script says so and exits. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton
import triton.language as tl

import pygpukit as gp
from pygpukit.benchmark.report import emit

# (name, bytes): each format's weight bytes (codes + scales) as benchmarks/test_gemv.py counts
# them; bf16 is the dense peer.
K1, N1, K2, N2 = 4096, 14336, 8192, 29568
SIZES = [
    ("nvfp4 K4096 N14336", N1 * K1 // 2 + N1 * K1 // 16),
    ("int4 K4096 N14336", N1 * K1 // 2 + N1 * (K1 // 128) * 4),
    ("fp8 K4096 N14336", N1 * K1 + N1 * 4),
    ("bf16 K4096 N14336", N1 * K1 * 2),
    ("int4 K8192 N29568", N2 * K2 // 2 + N2 * (K2 // 128) * 4),
    ("fp8 K8192 N29568", N2 * K2 + N2 * 4),
    ("bf16 K8192 N29568", N2 * K2 * 2),
]
CHUNKS = [4096, 8192, 16384, 32768, 65536]  # int32 words a program reads


@triton.jit
def _read(X, P, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """P[pid] = sum of words [pid * BLOCK * ITERS, ...) of X (n words): a pure read."""
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in tl.range(ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(X + offs, mask=offs < n, other=0, cache_modifier=".cg")
    tl.store(P + pid, tl.sum(acc))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args(argv)
    if not gp.is_cuda_available():
        print("benchmarks/read_rate.py: no CUDA device; nothing to time")
        return 0
    from pygpukit.backends.triton_kernels.driver import launch
    from pygpukit.benchmark.timing import DeviceTimer

    timer = DeviceTimer(0)
    copy_gbs = timer.copy_rate()
    rows: list[dict[str, Any]] = []
    print(f"device copy rate {copy_gbs:.0f} GB/s (read + write)")
    print(f"{'weight':>20} {'MB':>7} {'best us':>8} {'GB/s':>6} {'%copy':>6} {'chunk':>6}")
    for name, nbytes in SIZES:
        words = nbytes // 4
        x = gp.zeros((words,), gp.int32, "cuda:0")
        best: tuple[float, int] | None = None
        for chunk in CHUNKS:
            progs = triton.cdiv(words, chunk)
            part = gp.empty((progs,), gp.int32, "cuda:0")

            def run(x: gp.GPUArray = x, part: gp.GPUArray = part, words: int = words,
                    chunk: int = chunk) -> None:  # fmt: skip
                grid = (triton.cdiv(words, chunk),)
                launch(_read, grid, x, part, words, BLOCK=1024, ITERS=chunk // 1024)

            t = timer.median_seconds(run, rounds=args.rounds)
            if best is None or t < best[0]:
                best = (t, chunk)
        assert best is not None
        gbs = nbytes / best[0] / 1e9
        row = {"weight": name, "bytes": nbytes, "us": best[0] * 1e6, "gbs": gbs,
               "pct_copy": 100 * gbs / copy_gbs, "chunk_words": best[1]}  # fmt: skip
        rows.append(row)
        print(f"{name:>20} {nbytes / 1e6:>7.1f} {row['us']:>8.1f} {gbs:>6.0f} "
              f"{row['pct_copy']:>5.0f}% {best[1]:>6}")  # fmt: skip
    props = gp.get_device_properties(0)
    result = {"device": str(props.get("name", "cuda:0")), "copy_gbs": copy_gbs, "rows": rows}
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
