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
best chunk size of its byte count; stream order, no early launch), (c) the same kernels
launched early (programmatic dependent launch: each program's first block in flight before it
waits on the kernel ahead), and (d) one launch of co-resident programs that read every product
in turn with a grid barrier (atomic counters, acquire spins) between products. (a) bounds any
decode step; (b) is what a kernel a product pays with no overlap between kernels, before any
arithmetic; (d) against (c) is what a persistent kernel over a layer's products, whose stages
meet at grid barriers, would gain or lose on the boundaries alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

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
def _read(X, P, n, BLOCK: tl.constexpr, ITERS: tl.constexpr, PDL: tl.constexpr = False):
    """P[pid] = sum of words [pid * BLOCK * ITERS, ...) of X (n words): a pure read. PDL
    (launched early): the first block is in flight before the program waits on the kernel
    ahead, as the decode GEMV loads its first weight tile before gdc_wait."""
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.int32)
    if PDL:
        offs = pid * ITERS * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(X + offs, mask=offs < n, other=0, cache_modifier=".cg")
        gdc_wait()
        gdc_launch_dependents()
    for i in tl.range(1 if PDL else 0, ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(X + offs, mask=offs < n, other=0, cache_modifier=".cg")
    tl.store(P + pid, tl.sum(acc))


@triton.jit
def _read_barrier(X, STARTS, WORDS, P, C, n_prod, G, BLOCK: tl.constexpr, ITERS: tl.constexpr,
                  SPREAD: tl.constexpr, FLAG: tl.constexpr, EARLY: tl.constexpr):  # fmt: skip
    """Every product of a step read by one launch of G co-resident programs: program p reads
    chunks p, p + G, ... of product i, then meets the others at a grid barrier before product
    i + 1, in place of a kernel boundary. The barrier: program p arrives at one of product i's
    SPREAD counters (p % SPREAD: fewer atomics on one address) and polls them (acquire
    atomics) until they sum to G; or, FLAG, the program whose arrival completes the count
    raises product i's flag (release) and the others poll the flag, which only that program
    writes. EARLY: between its arrival and its polls each program issues the loads of
    its first chunk of product i + 1, used after the barrier (the early launch's first tile,
    in the persistent form). Starts and word counts are multiples of 1024 words (the host
    checks), so the loads are 16-byte vectors as in _read."""
    pid = tl.program_id(0)
    chunk: tl.constexpr = BLOCK * ITERS
    acc = tl.zeros([BLOCK], tl.int32)
    slots = tl.arange(0, SPREAD)
    ahead = tl.zeros([chunk], tl.int32)
    for i in range(n_prod):
        s = tl.multiple_of(tl.load(STARTS + i), 1024)
        w = tl.multiple_of(tl.load(WORDS + i), 1024)
        first = pid
        if EARLY and i > 0:
            acc += tl.sum(tl.reshape(ahead, [ITERS, BLOCK]), axis=0)
            first = pid + G
        for c in range(first, (w + chunk - 1) // chunk, G):
            base = s + c.to(tl.int64) * chunk
            left = w - c.to(tl.int64) * chunk
            for j in tl.static_range(ITERS):  # unrolled: every block's load in flight at once
                offs = j * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(X + base + offs, mask=offs < left, other=0, cache_modifier=".cg")
        if i + 1 < n_prod:
            if FLAG:
                last = tl.atomic_add(C + i, 1, sem="acq_rel", scope="gpu") == G - 1
                if last:
                    tl.atomic_xchg(C + n_prod + i, 1, sem="release", scope="gpu")
            else:
                last = False
                tl.atomic_add(C + i * SPREAD + pid % SPREAD, 1, sem="release", scope="gpu")
            if EARLY:
                nxt = tl.multiple_of(tl.load(STARTS + i + 1), 1024) + pid.to(tl.int64) * chunk
                n_left = tl.multiple_of(tl.load(WORDS + i + 1), 1024) - pid.to(tl.int64) * chunk
                offs = tl.arange(0, chunk)
                ahead = tl.load(X + nxt + offs, mask=offs < n_left, other=0, cache_modifier=".cg")
            # Polls: an atomic add of 0 with acquire at GPU scope, which Triton lowers to one
            # thread's ld.acquire.gpu shared through shared memory (a scalar), or to one atomic
            # a counter (SPREAD). Volatile loads by every thread with a fence after them
            # measured slower.
            if FLAG:
                if not last:
                    up = tl.atomic_add(C + n_prod + i, 0, sem="acquire", scope="gpu")
                    while up == 0:
                        up = tl.atomic_add(C + n_prod + i, 0, sem="acquire", scope="gpu")
            else:
                seen = tl.sum(tl.atomic_add(C + i * SPREAD + slots, 0, sem="acquire",
                                            scope="gpu"))  # fmt: skip
                while seen < G:
                    seen = tl.sum(tl.atomic_add(C + i * SPREAD + slots, 0, sem="acquire",
                                                scope="gpu"))  # fmt: skip
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
    """A decode step's weight bytes read by one kernel; by a graph of one kernel a product,
    launched plainly and early; and by one launch a graph with a grid barrier between products
    in each form of ``forms`` (the module docstring's (a)-(d))."""
    from pygpukit import runtime
    from pygpukit.backends.triton_kernels.driver import launch
    from pygpukit.models.step_graph import capture

    prods = step_products(name)
    total = sum(b for _, b in prods)
    one, one_chunk = _best_chunk(timer, total // 4, max(5, rounds // 3))
    chunks = {b: _best_chunk(timer, b // 4, rounds)[1] for b in {b for _, b in prods}}
    x = gp.zeros((total // 4,), gp.int32, "cuda:0")  # the weights, one after the other
    parts = {b: gp.empty((triton.cdiv(b // 4, chunks[b]),), gp.int32, "cuda:0") for b in chunks}

    stream = runtime.current_stream(gp.device("cuda:0"))

    def kernel_a_product(early: bool) -> float:
        """Seconds of a graph of one read kernel a product, launched early or plainly."""

        pdl = {"launch_pdl": True, "PDL": True} if early else {}

        def body() -> None:
            off = 0
            for _, b in prods:
                w = b // 4
                launch(_read, (triton.cdiv(w, chunks[b]),), x[off : off + w], parts[b], w,
                       BLOCK=1024, ITERS=chunks[b] // 1024, **pdl)  # fmt: skip
                off += w

        graph = capture(gp.device("cuda:0"), body, "read chain")
        return timer.median_seconds(lambda: graph.replay(stream), rounds=max(5, rounds // 3))

    chain, pdl = kernel_a_product(False), kernel_a_product(True)
    # One launch, a grid barrier between products (the persistent form's floor).
    words = np.array([b // 4 for _, b in prods], np.int64)
    offsets = np.concatenate([[0], np.cumsum(words)[:-1]]).astype(np.int64)
    if (words % 1024).any():  # _read_barrier's loads assume it (16-byte vectors)
        raise ValueError(f"{name}: a product of the step is not a multiple of 1024 words")
    starts = gp.from_numpy(offsets, device="cuda:0")
    counts = gp.from_numpy(words, device="cuda:0")
    sms = runtime.sm_count(gp.device("cuda:0"))
    barrier: dict[str, float | None] = {}
    # (programs an SM, chunk words, counters a product's arrivals spread over (0: one counter
    # and a flag), EARLY). On sm_90 these take 32-80 registers a thread at 4 warps: 6-16
    # programs an SM fit.
    forms = ((4, 2048, 1, False), (8, 2048, 1, False), (4, 4096, 1, False),
             (4, 4096, 8, False), (8, 2048, 0, False), (4, 4096, 0, False),
             (4, 4096, 8, True), (8, 2048, 0, True))  # fmt: skip
    cnt = gp.zeros((len(prods) * max(max(f[2], 2) for f in forms),), gp.int32, "cuda:0")
    for per_sm, chunk, sp, early in forms:
        grid = sms * per_sm
        part = gp.empty((grid,), gp.int32, "cuda:0")
        how = "one counter and a flag" if sp == 0 else f"{sp} counter(s)"
        ahead = ", the next product's first chunk during the barrier" if early else ""
        key = f"{per_sm}/SM chunk {chunk}, {how}{ahead}"

        def body_barrier(grid: int = grid, part: gp.GPUArray = part, chunk: int = chunk,
                         sp: int = sp, early: bool = early,
                         coop: bool = False) -> None:  # fmt: skip
            cnt[: len(prods) * max(sp, 2)] = 0  # a memset node in the graph
            launch(_read_barrier, (grid,), x, starts, counts, part, cnt, len(prods), grid,
                   BLOCK=1024, ITERS=chunk // 1024, SPREAD=max(sp, 1), FLAG=sp == 0,
                   EARLY=early, launch_cooperative_grid=coop)  # fmt: skip

        # The programs spin, so the grid must be resident at once: a cooperative launch,
        # which the driver refuses where it would not be, proves it first (and compiles).
        try:
            body_barrier(coop=True)
            gp.synchronize()
        except Exception as exc:  # the driver's refusal: this form cannot run here
            print(f"  {name}, {key}: the cooperative launch failed ({exc}); skipped")
            barrier[key] = None
            continue
        one_launch = capture(gp.device("cuda:0"), body_barrier, "read, one launch")
        t = timer.median_seconds(lambda graph=one_launch: graph.replay(stream),
                                 rounds=max(5, rounds // 3))  # fmt: skip
        barrier[key] = t * 1e6
    return {"model": name, "products": len(prods), "bytes": total, "one_kernel_us": one * 1e6,
            "one_kernel_chunk": one_chunk, "chain_us": chain * 1e6, "chain_pdl_us": pdl * 1e6,
            "barrier_us": barrier,
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
                  f"{r['chain_us']:.1f} us ({r['chain_tok_s']:.1f} tok/s), launched early "
                  f"{r['chain_pdl_us']:.1f} us")  # fmt: skip
            for k, v in r["barrier_us"].items():
                if v is not None:
                    print(f"  one launch, a grid barrier a product, {k}: {v:.1f} us")
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
