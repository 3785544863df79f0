"""Sampled decode with the draw on the host against the draw on the device (gp.sample).

    python benchmarks/sampling.py [--model llama-3.2-1b] [--new 128] [--batch 1 8]

The decode benchmark's model shape with random bf16 weights (benchmarks/_models.py), a different
16-token prompt a row, --new sampled tokens a row (temperature 0.8, top-k 50, top-p 0.9; and
temperature alone), stop tokens off, CUDA-graph decode steps. Per draw site: decode tok/s
(GenerationStats, prefill excluded) summed over rows, median of --repeats after a warm-up, in
the same process; and gp.sample's own device time for one row of the vocabulary. The last line
of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import pygpukit as gp
from benchmarks._models import CONFIGS, random_model, random_prompts
from pygpukit.benchmark.timing import DeviceTimer
from pygpukit.models import GenerationStats
from pygpukit.models.generation import stream_batch
from pygpukit.models.sampling import SamplingParams

SETTINGS: dict[str, dict[str, Any]] = {
    "t0.8 top-k 50 top-p 0.9": {"temperature": 0.8, "top_k": 50, "top_p": 0.9},
    "t0.8": {"temperature": 0.8, "top_k": 0, "top_p": 1.0},
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    timer = DeviceTimer(0)
    model, cfg, _ = random_model(args.model)
    prompts = random_prompts(cfg, 64)
    rows: list[dict[str, Any]] = []
    for name, s in SETTINGS.items():
        for b in args.batch:
            for where in ("host", "device"):
                params = SamplingParams(**s, seed=5, on_device=where == "device")
                rates = []
                for i in range(args.repeats + 1):  # the first run warms up
                    st = GenerationStats()
                    for _ in stream_batch(model, prompts[:b], args.new, params, stop_ids=(),
                                          stats=st, graph=True):  # fmt: skip
                        pass
                    if i:
                        rates.append(st.decode_tokens_per_s)
                rows.append({"setting": name, "batch": b, "draw": where,
                             "decode_tok_s": round(statistics.median(rates), 1)})  # fmt: skip
                print(f"{name:>24} batch {b:3d} {where:>6}: {rows[-1]['decode_tok_s']:9.1f} tok/s",
                      flush=True)  # fmt: skip
    lg = gp.asarray(np.random.default_rng(0).standard_normal((1, cfg["vocab_size"])), gp.bfloat16,
                    "cuda:0")  # fmt: skip
    ctr = gp.zeros((1,), gp.int64, "cuda:0")
    kernel = {}
    for name, s in SETTINGS.items():
        kw = {k: v for k, v in s.items()}

        def call(kw: dict[str, Any] = kw) -> None:
            gp.sample(lg, ctr, **kw)

        kernel[name] = round(timer.median_seconds(call, rounds=20) * 1e6, 1)
        print(f"gp.sample one row of {cfg['vocab_size']}, {name}: {kernel[name]} us")
    print(json.dumps({"model": args.model, "new": args.new, "decode": rows, "sample_us": kernel}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
