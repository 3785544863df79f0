"""The measurement decode_ab.py's experiments share: decode tok/s of greedy generate at 32 steps
a sync, the 1-step graph's device time, a step inside the 32-step graph at a chosen cache
position, and two alternating rounds of named variants with the tokens checked against the
first variant's."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pygpukit as gp
from benchmarks.decode_e2e import _decode_rate
from benchmarks.decode_paths import _step_us
from pygpukit.benchmark.timing import replay_seconds

PROMPT_LEN = 16  # tokens of the random prompt every experiment decodes after


def cache_need(prompt_len: int, new: int) -> int:
    """The cache slots generate_rate asks for: the prompt, the longer of --new and rounds'
    200-token generate, and a spare run's steps."""
    return prompt_len + max(new, 200) + 64


def generate_rate(model: Any, prompt: list[list[int]], new: int, repeats: int) -> dict[str, Any]:
    """decode_e2e's decode tok/s of greedy generate at steps_per_sync 32 (a fresh capture)."""
    model.drop_step_graphs()
    # One cache for all that rounds runs after this (its 200-token generate, run_step_us's
    # positions): a later, larger request would reallocate it and drop the run graph captured
    # here, which run_step_us reads (with --new under 200 it failed that way).
    model.ensure_cache(len(prompt), min(cache_need(len(prompt[0]), new), model.config.max_context))

    def run(n: int) -> Any:
        out = model.generate(
            prompt, n, temperature=0, stop_token_ids=(), graph=True, steps_per_sync=32
        )
        gp.synchronize()
        return out

    return _decode_rate(run, 1, new, repeats)


def run_step_us(model: Any, steps: int = 32, reps: int = 10, at: int = 128) -> float:
    """Device microseconds a step of the kept steps-step greedy run's graph takes, each replay
    started at cache position ``at`` (the run's inputs written before every replay: replays
    back to back would carry the positions past the cache's end, where attention and the cache
    write do no work)."""
    import numpy as np

    from pygpukit import runtime

    run = model.greedy_run(1, steps)
    assert run.graph is not None and at + steps <= run.cache.max_seq_len
    stream = runtime.current_stream(model.device)

    def inputs() -> None:
        run.pos[:] = np.array([[at]], np.int64)
        run.marks[:] = np.array([[at], [at + 1]], np.int32)

    return replay_seconds(run.graph, stream, reps, warmup=2, before=inputs) * 1e6 / steps


def setting(*assign: tuple[Any, str, Any]) -> Callable[[], None]:
    """A variant for rounds: each (module, name, value) set when it runs."""

    def apply() -> None:
        for mod, name, value in assign:
            setattr(mod, name, value)

    return apply


def flag_rounds(
    model: Any,
    prompt: list[list[int]],
    args: argparse.Namespace,
    module: Any,
    name: str,
    label: str,
    repeats: int | None = None,
) -> None:
    """rounds over a module's boolean knob: its shipped value, then the other; restored after."""
    shipped = getattr(module, name)
    try:
        variants = [(f"{label} {v}", setting((module, name, v))) for v in (shipped, not shipped)]
        rounds(model, prompt, args, variants, repeats)
    finally:
        setattr(module, name, shipped)


def rounds(
    model: Any,
    prompt: list[list[int]],
    args: argparse.Namespace,
    variants: list[tuple[str, Callable[[], None]]],
    repeats: int | None = None,
    positions: tuple[int, ...] = (),
) -> None:
    """Two alternating rounds of the variants (each a name and what sets it): decode tok/s at 32
    steps a sync (generate_rate: a fresh capture, the 32-step run first), the 1-step graph's
    device time (50 replays), a step inside the 32-step graph at cache positions --at..--at +
    32 (and from each of ``positions``), and whether the tokens equal the first variant's. The
    caller restores what the variants set."""
    first: Any = None
    for rnd in range(2):
        for name, apply in variants:
            apply()
            r = generate_rate(model, prompt, args.new, args.repeats if repeats is None else repeats)
            model.generate(prompt, 200, temperature=0, stop_token_ids=())
            step = _step_us(model, 1) * 1e6
            run = run_step_us(model, at=args.at)
            at = [round(run_step_us(model, at=p), 1) for p in positions]
            first = r["tokens"] if first is None else first
            same = r["tokens"] == first
            print(f"{args.model} round {rnd}: {name:40s} graph step {step:7.1f} us, in the "
                  f"32-step graph {run:7.1f} us ({1e6 / run:7.1f} tok/s), "
                  + (f"from {positions}: {at} us, " if positions else "")
                  + f"{r['decode_tok_s']:8.1f} tok/s, tokens as the first {same}")  # fmt: skip
    model.drop_step_graphs()  # none of the variants' graphs stays kept
