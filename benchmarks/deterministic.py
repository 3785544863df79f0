"""What the deterministic (batch-invariant) mode costs, and that it keeps its promise, on the
decode benchmark's model shapes (random bf16 weights, benchmarks/_models.py).

    python benchmarks/deterministic.py                        # llama-3.2-1b, batch 1 and 8
    python benchmarks/deterministic.py --model qwen3-8b --batch 1

Per mode (default, deterministic) and batch: greedy decode of --new tokens after a 16-token
prompt per row (a different one per row), stop tokens off, CUDA-graph decode steps; decode
tokens/s (GenerationStats: prefill excluded) summed over rows, median of --repeats after a
warm-up, and the fraction of the bandwidth bound (weight bytes per step over the copy rate
measured in the same run). Checks printed beside: the mode's tokens repeat run to run, and under
the deterministic mode row 0's tokens at every batch equal batch 1's. Then the per-op cost at
batch 1: gp.linear on cuBLASLt vs the fixed-tile GEMM at the model's projection shapes (device
time, L2 flushed). The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import pygpukit as gp
from benchmarks._models import CONFIGS, random_model, random_prompts, timed_generate
from pygpukit.benchmark.timing import DeviceTimer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    timer = DeviceTimer(0)
    model, cfg, weight_bytes = random_model(args.model)
    copy = timer.copy_rate()
    prompts = random_prompts(cfg, 64)
    kw: dict[str, Any] = {"temperature": 0, "stop_token_ids": (), "graph": True}
    rows: list[dict[str, Any]] = []
    first_row: dict[bool, dict[int, list[int]]] = {False: {}, True: {}}
    for det in (False, True):
        gp.set_deterministic(det)
        for b in args.batch:
            batch = prompts[:b]
            tps, outs = timed_generate(model, batch, args.new, args.repeats, **kw)
            bound = copy * 1e9 / weight_bytes * b  # tokens/s if each step only read the weights
            first_row[det][b] = cast(list[int], outs[0][0])
            rows.append({
                "mode": "deterministic" if det else "default", "batch": b,
                "decode_tok_s": round(tps, 1), "bound_fraction": round(tps / bound, 3),
                "repeats_equal": all(o == outs[0] for o in outs),
            })  # fmt: skip
    gp.set_deterministic(False)
    base = {r["batch"]: r["decode_tok_s"] for r in rows if r["mode"] == "default"}
    for r in rows:
        r["vs_default"] = round(r["decode_tok_s"] / base[r["batch"]], 3)
        b0 = min(args.batch)
        r["row0_equals_smallest_batch"] = (
            first_row[r["mode"] == "deterministic"][r["batch"]]
            == first_row[r["mode"] == "deterministic"][b0]
        )
        print(
            f"{r['mode']:>13} batch {r['batch']:3d}: {r['decode_tok_s']:9.1f} tok/s  "
            f"{100 * r['bound_fraction']:5.1f}% of bound  x{r['vs_default']:.3f} of default  "
            f"repeats equal {r['repeats_equal']}  row 0 as batch {b0}: "
            f"{r['row0_equals_smallest_batch']}"
        )
    ops = _linear_costs(timer, cfg)
    for o in ops:
        ratio = o["fixed_us"] / o["cublaslt_us"]
        print(
            f"linear M=1 K{o['k']} N{o['n']}: cuBLASLt {o['cublaslt_us']:.1f} us, fixed-tile "
            f"{o['fixed_us']:.1f} us ({o['fixed_gbs']:.0f} GB/s, {ratio:.2f}x)"
        )
    print(json.dumps({"model": args.model, "new": args.new, "copy_gbs": round(copy, 1),
                      "weight_bytes": weight_bytes, "decode": rows, "linear": ops}))  # fmt: skip
    return 0


def _linear_costs(timer: DeviceTimer, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    h, f = cfg["hidden_size"], cfg["intermediate_size"]
    d = cfg.get("head_dim", h // cfg["num_attention_heads"])
    qkv = (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * d
    res = []
    for k, n in ((h, qkv), (h, h), (h, f), (f, h), (h, cfg["vocab_size"])):
        x = gp.asarray(np.random.default_rng(0).standard_normal((1, k)), gp.bfloat16, "cuda:0")
        w = gp.asarray(np.random.default_rng(1).standard_normal((n, k)), gp.bfloat16, "cuda:0")
        t = {}

        def call(x: gp.GPUArray = x, w: gp.GPUArray = w) -> None:
            gp.linear(x, w)

        for det in (False, True, False, True):  # the first pass warms clocks and caches up
            gp.set_deterministic(det)
            t[det] = timer.median_seconds(call, rounds=30)
        gp.set_deterministic(False)
        res.append({
            "k": k, "n": n, "cublaslt_us": round(t[False] * 1e6, 2),
            "fixed_us": round(t[True] * 1e6, 2), "fixed_gbs": round(2 * n * k / t[True] / 1e9, 1),
        })  # fmt: skip
    return res


if __name__ == "__main__":
    raise SystemExit(main())
