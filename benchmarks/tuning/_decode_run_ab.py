"""decode_ab.py's experiments on the run of steps around the model's step (models/decode_loop):
ramp (a run's write marks made once at its start, or one add a step), tails (what a run of
fewer steps than the graph's costs, made of the graphs of its binary digits, against a replay
of the whole graph), host (what a generation costs beyond its steps' device time) and
first-run (generate's first run enqueued behind the prefill, or after the host's draw).
decode_ab.py's docstring says what each measures."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import pygpukit as gp
from benchmarks.tuning._decode_rounds import PROMPT_LEN, cache_need, flag_rounds, run_step_us
from pygpukit import runtime
from pygpukit.benchmark.timing import replay_seconds

__all__ = ["RUN_EXPERIMENTS"]


def _ramp(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    from pygpukit.models import decode_loop

    flag_rounds(model, prompt, args, decode_loop, "RAMP_MARKS", "marks made at a run's start")


class _Steps:
    """replay_seconds' graph: a greedy run of n steps (DecodeRun._enqueue, the tokens' copy to
    the host included), its lengths taken back after."""

    def __init__(self, run: Any, n: int) -> None:
        self.run, self.n = run, n

    def replay(self, stream: Any) -> None:
        self.run._enqueue(self.n)
        self.run.cache.lengths[: self.run.rows] -= self.n


def _tails(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    steps = 32
    model.drop_step_graphs()
    model.ensure_cache(1, min(cache_need(PROMPT_LEN, args.new), model.config.max_context))
    run = model.greedy_run(1, steps)
    assert run.graph is not None and args.at + steps <= run.cache.max_seq_len
    stream = runtime.current_stream(model.device)

    def inputs() -> None:  # every run starts at cache position --at (as run_step_us)
        run.pos[:] = np.array([[args.at]], np.int64)
        run.marks[:] = np.array([[args.at], [args.at + 1]], np.int32)
        run.cache.lengths[:1] = args.at

    t = 1
    while t < steps:
        t0 = time.perf_counter()
        g = run._tail(t)
        ms = (time.perf_counter() - t0) * 1e3
        print(f"{args.model}: the {t:2d}-step graph recorded in {ms:7.1f} ms, keeps "
              f"{g.kept_bytes / 2**20:6.2f} MiB")  # fmt: skip
        t *= 2
    reps = max(args.repeats, 5)
    whole = replay_seconds(_Steps(run, steps), stream, reps, warmup=2, before=inputs) * 1e6
    print(f"{args.model}: a run of {steps} steps {whole:8.1f} us ({whole / steps:6.1f} a step): "
          "what any shorter run replayed before")  # fmt: skip
    for n in (1, 2, 3, 5, 8, 16, 24, 31):
        us = replay_seconds(_Steps(run, n), stream, reps, warmup=2, before=inputs) * 1e6
        print(f"{args.model}: a run of {n:2d} steps ({run.segments(n)}) {us:8.1f} us "
              f"({us / n:6.1f} a step), {whole / us:5.2f}x the whole graph's replay")  # fmt: skip
    gp.synchronize()
    model.drop_step_graphs()


def _first_run(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    from pygpukit.models import decode_loop

    label = "first run behind the prefill"
    repeats = max(args.repeats, 7)
    flag_rounds(model, prompt, args, decode_loop, "EARLY_FIRST_RUN", label, repeats)


def _host(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    model.drop_step_graphs()
    model.ensure_cache(1, min(cache_need(PROMPT_LEN, args.new), model.config.max_context))

    def wall(n: int) -> float:
        t0 = time.perf_counter()
        model.generate(prompt, n, temperature=0, stop_token_ids=(), graph=True, steps_per_sync=32)
        gp.synchronize()
        return time.perf_counter() - t0

    sizes = (2, 3, 17, 33, 34, 129, args.new)
    for n in (1, *sizes):  # warm-up: the run's graph and every short run's graphs recorded
        wall(n)
    step = run_step_us(model, at=args.at)
    reps = max(args.repeats, 7)
    t1 = statistics.median(wall(1) for _ in range(reps))
    print(f"{args.model}: a step inside the 32-step graph {step:.1f} us; "
          f"generate(1) {t1 * 1e3:.2f} ms")  # fmt: skip
    for n in sizes:
        tn = statistics.median(wall(n) for _ in range(reps))
        extra = (tn - t1) * 1e6 - (n - 1) * step
        print(f"{args.model}: {n:3d} new tokens: {(tn - t1) * 1e6:9.1f} us more than 1, "
              f"{n - 1:3d} steps' device time {(n - 1) * step:9.1f}, the rest {extra:7.1f} us "
              f"({extra / (n - 1):5.2f} a token)")  # fmt: skip
    model.drop_step_graphs()


RUN_EXPERIMENTS: dict[str, Callable[[Any, list[list[int]], argparse.Namespace], None]] = {
    "ramp": _ramp, "tails": _tails, "host": _host, "first-run": _first_run,
}  # fmt: skip
