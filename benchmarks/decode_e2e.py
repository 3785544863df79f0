"""Decode end to end against HF transformers on the same random bf16 weights, in one process:

    python benchmarks/decode_e2e.py                       # llama-3.2-1b, batch 1 8 32, 256 new
    python benchmarks/decode_e2e.py --model qwen3-8b --batch 1 8 32 --hf eager static

HF transformers initialises the model on the GPU and pygpukit loads the same tensors through its
ordinary loader (benchmarks/_models.hf_and_pygpukit). Every row gets a different random 16-token
prompt and ``--new`` greedy tokens (stop tokens off). Systems, per batch:

- "pygpukit graph": ``generate(graph=True)``, one decode step a CUDA graph replay and a host
  round trip;
- "pygpukit graph, k a sync": ``steps_per_sync=k`` (k steps a graph, one round trip);
- "HF eager": ``hf.generate`` with its dynamic cache;
- "HF static + compile": ``hf.generate(cache_implementation="static")``, which compiles the
  forward with torch.compile (CUDA graphs) on its first call; skipped with a reason if it fails.

Decode tok/s is measured the same way for every system: the median wall time of a call for
``new`` tokens minus that of a call for 1 token (the prefill and its first token), over the
``new - 1`` tokens in between, summed over the rows. The bound is the copy rate measured in the
run over the weight bytes, times the rows (batch-1 decode must read every weight once a step);
beside it, the same over the weight bytes a step does read (an untied input embedding only by
its tokens' rows; the KV cache's reads are not counted: step_bound_fraction).
Each row also says whether the repeats gave the same tokens and how many leading tokens of row 0
equal HF eager's (random weights: near ties flip between any two implementations). The last line
of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygpukit as gp
from benchmarks._models import CONFIGS, hf_and_pygpukit, random_prompts, weight_bytes
from pygpukit.benchmark.timing import DeviceTimer


def _median_s(fn: Callable[[], Any], repeats: int) -> tuple[float, list[Any]]:
    times, outs = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        outs.append(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), outs


def _decode_rate(run: Callable[[int], Any], rows: int, new: int, repeats: int) -> dict[str, Any]:
    """Decode tok/s of ``run(n)`` (generate n new tokens a row, synchronised): warm-up calls at
    both lengths, then (median time at ``new`` - median time at 1) over the tokens between."""
    run(1)
    run(new)
    t1, _ = _median_s(lambda: run(1), repeats)
    tn, outs = _median_s(lambda: run(new), repeats)
    return {
        "decode_tok_s": round(rows * (new - 1) / (tn - t1), 1),
        "wall_tok_s": round(rows * new / tn, 1),
        "repeats_equal": all(o == outs[0] for o in outs),
        "tokens": outs[0],
    }


def _leading_equal(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, nargs="+", default=[8, 32], help="steps_per_sync k")
    p.add_argument("--hf", nargs="*", default=["eager", "static"], choices=["eager", "static"])
    args = p.parse_args(argv)
    if args.new < 2:
        p.error("--new must be at least 2 (decode tokens follow the prefill's first)")
    import torch

    timer = DeviceTimer(0)
    hf, ours = hf_and_pygpukit(args.model)
    cfg = CONFIGS[args.model]
    nbytes = weight_bytes(dict(cfg))  # the bound of the earlier tables
    # The weight bytes a step reads: an untied input embedding only by its tokens' rows
    # (Qwen3-8B: 1.24 GB of its 16.4 GB are never read by a decode step); cache reads not counted.
    step_nbytes = nbytes - (0 if cfg.get("tie_word_embeddings") else
                            cfg["vocab_size"] * cfg["hidden_size"] * 2)  # fmt: skip
    copy = timer.copy_rate()
    prompts = random_prompts(cfg, max(args.batch))
    rows: list[dict[str, Any]] = []

    def ours_run(batch: list[list[int]], k: int) -> Callable[[int], Any]:
        def run(n: int) -> Any:
            out = ours.generate(
                batch, n, temperature=0, stop_token_ids=(), graph=True, steps_per_sync=k
            )
            gp.synchronize()
            return [o[len(q) :] for o, q in zip(out, batch, strict=True)]  # new tokens only

        return run

    def hf_run(ids: Any, static: bool) -> Callable[[int], Any]:
        mask = torch.ones_like(ids)
        extra = {"cache_implementation": "static"} if static else {}

        def run(n: int) -> Any:
            with torch.no_grad():
                out = hf.generate(
                    ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                    do_sample=False, **extra,
                )  # fmt: skip
            torch.cuda.synchronize()
            return out[:, ids.shape[1] :].tolist()

        return run

    for b in args.batch:
        batch = prompts[:b]
        bound = copy * 1e9 / nbytes * b
        step_bound = copy * 1e9 / step_nbytes * b
        ids = torch.tensor(batch, device="cuda")
        systems: list[tuple[str, Callable[[int], Any]]] = [("pygpukit graph", ours_run(batch, 1))]
        systems += [(f"pygpukit graph, {k} a sync", ours_run(batch, k)) for k in args.steps]
        if "eager" in args.hf:
            systems.append(("HF eager", hf_run(ids, False)))
        if "static" in args.hf:
            systems.append(("HF static + compile", hf_run(ids, True)))
        firsts: dict[str, list[int]] = {}  # system -> its new tokens of row 0
        for name, run in systems:
            ours.drop_step_graphs()
            row: dict[str, Any] = {"system": name, "batch": b}
            try:
                t0 = time.perf_counter()
                row |= _decode_rate(run, b, args.new, args.repeats)
                row["seconds"] = round(time.perf_counter() - t0, 1)
            except Exception as exc:  # an HF path that does not run here: say why, go on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                rows.append(row)
                print(f"{name:>28} batch {b:3d}: did not run: {row['error']}", flush=True)
                continue
            firsts[name] = row.pop("tokens")[0]
            row["bound_fraction"] = round(row["decode_tok_s"] / bound, 3)
            row["step_bound_fraction"] = round(row["decode_tok_s"] / step_bound, 3)
            rows.append(row)
            print(
                f"{name:>28} batch {b:3d}: {row['decode_tok_s']:9.1f} tok/s decode "
                f"({100 * row['bound_fraction']:5.1f}% of bound {bound:.0f}, "
                f"{100 * row['step_bound_fraction']:5.1f}% of the step's bytes' "
                f"{step_bound:.0f}), "
                f"{row['wall_tok_s']:9.1f} tok/s wall, repeats equal {row['repeats_equal']}",
                flush=True,
            )
        ref = firsts.get("HF eager")
        for r in rows:
            if r["batch"] == b and r["system"] in firsts:
                mine = firsts[r["system"]]
                r["row0_leading_equal_hf"] = None if ref is None else _leading_equal(mine, ref)
    print(json.dumps({
        "model": args.model, "new": args.new, "device": torch.cuda.get_device_name(0),
        "copy_gbs": round(copy, 1),
        "weight_bytes": nbytes, "step_bytes": step_nbytes, "torch": torch.__version__,
        "rows": rows,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
