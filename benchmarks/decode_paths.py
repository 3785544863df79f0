"""Greedy decode on the benchmark model shapes (random bf16 weights, benchmarks/_models.py), by
decode path, all in one process:

    python benchmarks/decode_paths.py                                  # llama-3.2-1b, batch 1
    python benchmarks/decode_paths.py --model qwen3-8b --batch 1 8 --steps 8

Paths, per batch:
- "cuBLASLt": every product on cuBLASLt and the gated MLP as cuBLASLt + silu_mul (the path
  before the decode GEMV: ``gp.set_route("linear:native")``, which keeps one row on op linear);
- "GEMV": the default (one row: the Triton decode GEMV and the fused gate/up GEMV, with
  programmatic dependent launch on sm_90+);
- "GEMV, no PDL": the same kernels launched plainly;
- "GEMV, k steps a sync": the default with ``steps_per_sync=k`` (k greedy steps a CUDA graph).
Each row: decode tokens/s (GenerationStats, prefill excluded) summed over rows, median of
--repeats after a warm-up, its fraction of the bandwidth bound (weight bytes per step at the copy
rate measured in the run), whether the repeats gave the same tokens, and whether the tokens
equal the default path's. Then the device time of one graph-replayed decode step (50 replays
back to back, no host in between) per path. The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygpukit as gp
from benchmarks._models import CONFIGS, random_model, random_prompts, timed_generate
from pygpukit import runtime
from pygpukit.backends.triton_kernels import driver
from pygpukit.benchmark.timing import DeviceTimer, replay_seconds


def _path(name: str) -> None:
    """Switch the process to a decode path (module docstring)."""
    gp.set_route(linear="native" if name == "cuBLASLt" else "auto")
    driver.set_pdl(name != "GEMV, no PDL")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, nargs="+", default=[1])
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=8, help="steps_per_sync of the last path")
    args = p.parse_args(argv)
    timer = DeviceTimer(0)
    model, cfg, weight_bytes = random_model(args.model)
    copy = timer.copy_rate()
    prompts = random_prompts(cfg, max(args.batch))
    paths = ["cuBLASLt", "GEMV", "GEMV, no PDL", f"GEMV, {args.steps} steps a sync"]
    rows: list[dict[str, Any]] = []
    for b in args.batch:
        batch = prompts[:b]
        ref: list[Any] | None = None
        for name in paths:
            _path(name)
            k = args.steps if "a sync" in name else 1
            kw: dict[str, Any] = {"temperature": 0, "stop_token_ids": (), "steps_per_sync": k}
            model.drop_step_graphs()
            tps, outs = timed_generate(model, batch, args.new, args.repeats, **kw)
            if name == "GEMV":
                ref = outs[0]
            bound = copy * 1e9 / weight_bytes * b
            rows.append({
                "path": name, "batch": b, "decode_tok_s": round(tps, 1),
                "bound_fraction": round(tps / bound, 3),
                "repeats_equal": all(o == outs[0] for o in outs), "tokens": outs[0],
                "step_us": round(_step_us(model, b) * 1e6, 1) if k == 1 else None,
            })  # fmt: skip
        for r in rows:
            if r["batch"] == b:
                r["equal_to_gemv"] = r.pop("tokens") == ref
    _path("GEMV")
    for r in rows:
        step = "" if r["step_us"] is None else f"  graph step {r['step_us']:7.1f} us"
        print(
            f"{r['path']:>22} batch {r['batch']:3d}: {r['decode_tok_s']:9.1f} tok/s  "
            f"{100 * r['bound_fraction']:5.1f}% of bound  repeats equal {r['repeats_equal']}  "
            f"tokens as GEMV {r['equal_to_gemv']}{step}"
        )
    print(json.dumps({"model": args.model, "new": args.new, "copy_gbs": round(copy, 1),
                      "weight_bytes": weight_bytes, "decode": rows}))  # fmt: skip
    return 0


def _step_us(model: Any, rows: int) -> float:
    """Device seconds of one replay of the captured decode step, 50 replays back to back."""
    sg = model.step_graph(rows)
    return replay_seconds(sg.graph, runtime.current_stream(model.device), 50)


if __name__ == "__main__":
    raise SystemExit(main())
