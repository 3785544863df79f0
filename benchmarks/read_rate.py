"""The pure-read ceiling: how fast one kernel can read a weight's bytes, by size, against the
device copy rate (pygpukit.benchmark.timing, L2 flushed before each round).

    python benchmarks/read_rate.py [--json results.json] [--rounds 30]
        [--step llama-3.2-1b|qwen3-8b ...]

A decode GEMV must read its weight once; for a weight of tens of megabytes the launch and the
ramp to full bandwidth are a visible share of the time. This times a kernel that does nothing
but read (int32 words, each program summing a contiguous chunk into one value, a few bytes
written) at the byte counts of the decode GEMV's formats at K4096 N14336 and K8192 N29568, over
a sweep of chunk sizes, and reports the fastest as the ceiling any GEMV of those bytes can
reach. Without a GPU the script says so and exits. The last line is one JSON object.

--step MODEL: the same ceiling for a whole batch-1 decode step of a benchmark model shape
(benchmarks/_models.CONFIGS, bf16): its products' weight bytes (per layer qkv, output
projection, gate and up, down; then the lm_head) read (a) by one kernel over all of them and
(b) by one read kernel per product in the step's order, replayed from a CUDA graph (each at the
best chunk size of its byte count; stream order, no early launch). (a) bounds any decode step;
(b) is what a kernel a product pays with no overlap between kernels, before any arithmetic.
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


def step_products(name: str) -> list[tuple[str, int]]:
    """(product, bf16 weight bytes) of one decode step of a CONFIGS model, in the step's order."""
    from benchmarks._models import CONFIGS

    c = CONFIGS[name]
    h, i, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    layer = [("qkv", (nh + 2 * nkv) * d * h * 2), ("o_proj", h * nh * d * 2),
             ("gate/up", 2 * i * h * 2), ("down", h * i * 2)]  # fmt: skip
    return layer * c["num_hidden_layers"] + [("lm_head", c["vocab_size"] * h * 2)]


def _best_chunk(timer: Any, words: int, rounds: int) -> tuple[float, int]:
    """(seconds, chunk) of the fastest read of ``words`` int32 words over CHUNKS."""
    from pygpukit.backends.triton_kernels.driver import launch

    x = gp.zeros((words,), gp.int32, "cuda:0")
    best: tuple[float, int] | None = None
    for chunk in CHUNKS:
        part = gp.empty((triton.cdiv(words, chunk),), gp.int32, "cuda:0")

        def run(x: gp.GPUArray = x, part: gp.GPUArray = part, chunk: int = chunk) -> None:
            launch(_read, (triton.cdiv(words, chunk),), x, part, words, BLOCK=1024,
                   ITERS=chunk // 1024)  # fmt: skip

        t = timer.median_seconds(run, rounds=rounds)
        if best is None or t < best[0]:
            best = (t, chunk)
    assert best is not None
    return best


def step_ceiling(timer: Any, name: str, rounds: int) -> dict[str, Any]:
    """A decode step's weight bytes read by one kernel, and by a graph of one kernel each."""
    from pygpukit import runtime
    from pygpukit.backends.triton_kernels.driver import launch
    from pygpukit.models.step_graph import capture

    prods = step_products(name)
    total = sum(b for _, b in prods)
    one, one_chunk = _best_chunk(timer, total // 4, max(5, rounds // 3))
    chunks = {b: _best_chunk(timer, b // 4, rounds)[1] for b in {b for _, b in prods}}
    x = gp.zeros((total // 4,), gp.int32, "cuda:0")  # the weights, one after the other
    parts = {b: gp.empty((triton.cdiv(b // 4, chunks[b]),), gp.int32, "cuda:0") for b in chunks}

    def body() -> None:
        off = 0
        for _, b in prods:
            w = b // 4
            launch(_read, (triton.cdiv(w, chunks[b]),), x[off : off + w], parts[b], w,
                   BLOCK=1024, ITERS=chunks[b] // 1024)  # fmt: skip
            off += w

    graph = capture(gp.device("cuda:0"), body, "read chain")
    stream = runtime.current_stream(gp.device("cuda:0"))
    chain = timer.median_seconds(lambda: graph.replay(stream), rounds=max(5, rounds // 3))
    return {"model": name, "products": len(prods), "bytes": total, "one_kernel_us": one * 1e6,
            "one_kernel_chunk": one_chunk, "chain_us": chain * 1e6,
            "one_kernel_tok_s": 1 / one, "chain_tok_s": 1 / chain}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--step", nargs="*", default=[], help="decode-step ceilings of these models")
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
    if args.step:
        steps = [step_ceiling(timer, name, args.rounds) for name in args.step]
        for r in steps:
            print(f"{r['model']}: {r['bytes'] / 1e9:.3f} GB in {r['products']} products; one "
                  f"kernel {r['one_kernel_us']:.1f} us ({r['one_kernel_tok_s']:.1f} tok/s, "
                  f"{r['bytes'] / r['one_kernel_us'] / 1e3:.0f} GB/s), a kernel a product "
                  f"{r['chain_us']:.1f} us ({r['chain_tok_s']:.1f} tok/s)")  # fmt: skip
        props = gp.get_device_properties(0)
        emit({"device": str(props.get("name", "cuda:0")), "copy_gbs": copy_gbs, "steps": steps},
             args.json)  # fmt: skip
        return 0
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
