"""The kernels of one captured batch-1 decode step, one by one, under Nsight Compute.

    ncu --profile-from-start off --clock-control none \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \\
        python benchmarks/tuning/step_kernels.py [--model llama-3.2-1b] > step.csv
    python benchmarks/tuning/step_kernels.py --table step.csv [--copy-gbs 4250]

The first form builds the model (random bf16 weights, benchmarks/_models.py; --quantize as in
decode_ab.py), greedy-decodes so that the step graph of one row is captured and its cache holds
--context tokens, then replays that graph once between cuProfilerStart and cuProfilerStop: Nsight
Compute (graph nodes profiled one by one, its default) records each kernel of the step. The
second form reads the CSV and prints each kernel's launches (by grid and bytes read), time and
DRAM bytes, and the rate over its bytes.

Under the profiler the kernels run one at a time, with no early launch overlapping them and
caches flushed between them (Nsight's default), so their sum is longer than the replayed step
(decode_paths.py's graph step): the table shows where a step's kernels spend their own time and
how far each is from the copy rate, not the overlap.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import re
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks._models import CONFIGS


def _profile(args: argparse.Namespace) -> None:
    import numpy as np

    import pygpukit as gp
    from benchmarks._models import random_model
    from pygpukit import runtime

    model, cfg, _ = random_model(args.model, quantize=args.quantize)
    rng = np.random.default_rng(0)
    prompt = [rng.integers(3, cfg["vocab_size"], size=16).tolist()]
    # Captures the one-row step graph and fills the cache to 16 + context tokens.
    model.generate(prompt, args.context, temperature=0, stop_token_ids=(), graph=True)
    gp.synchronize()
    graph = model.step_graph(1).graph
    stream = runtime.current_stream(model.device)
    graph.replay(stream)  # warm: every kernel of the step has run once in this graph
    gp.synchronize()
    driver = ctypes.CDLL("libcuda.so.1")
    if driver.cuProfilerStart() != 0:
        raise RuntimeError("cuProfilerStart failed")
    graph.replay(stream)
    gp.synchronize()
    driver.cuProfilerStop()


# Nsight Compute's units (both spellings its versions print) -> us and bytes.
_UNIT_SCALE = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
               "msecond": 1e3, "byte": 1.0, "B": 1.0, "Kbyte": 1e3, "KB": 1e3,
               "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9}  # fmt: skip


def _family(name: str) -> str:
    """A kernel's name without its template arguments and parameters."""
    base = re.sub(r"\(.*$", "", name)
    base = re.sub(r"^void ", "", base)
    depth, out = 0, []
    for ch in base:  # drop <...> at any depth
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    return "".join(out).split("::")[-1] or base


def _table(path: str, copy_gbs: float | None) -> None:
    launches: OrderedDict[str, dict[str, Any]] = OrderedDict()
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("==")]
    head = rows[0]
    col = {k: head.index(k) for k in ("ID", "Kernel Name", "Grid Size", "Metric Name",
                                      "Metric Unit", "Metric Value")}  # fmt: skip
    for r in rows[1:]:
        if len(r) < len(head) or not r[col["ID"]].isdigit():
            continue
        rec = launches.setdefault(r[col["ID"]], {"name": r[col["Kernel Name"]],
                                                 "grid": r[col["Grid Size"]]})  # fmt: skip
        value = float(r[col["Metric Value"]].replace(",", "")) * _UNIT_SCALE[r[col["Metric Unit"]]]
        key = "us" if r[col["Metric Name"]].startswith("gpu__time") else "bytes"
        rec[key] = rec.get(key, 0.0) + value
    # A kernel family's launches split by grid and bytes read (0.1 MB): the products of one
    # kernel (o_proj and down of a GEMV, say) are told apart by their sizes.
    fams: OrderedDict[str, list[float]] = OrderedDict()
    for rec in launches.values():
        key = f"{_family(rec['name'])} {rec['grid']} {rec.get('bytes', 0.0) / 1e6:.1f} MB"
        f = fams.setdefault(key, [0, 0.0, 0.0])
        f[0] += 1
        f[1] += rec.get("us", 0.0)
        f[2] += rec.get("bytes", 0.0)
    total = sum(f[1] for f in fams.values())
    print(f"{len(launches)} launches, {total:.1f} us in all (one at a time)")
    print(
        "| kernel | launches | us | share | DRAM read MB | GB/s"
        + (" | of copy |" if copy_gbs else " |")
    )
    print("|---|---|---|---|---|---" + ("|---|" if copy_gbs else "|"))
    for name, (n, us, b) in sorted(fams.items(), key=lambda kv: -kv[1][1]):
        gbs = b / (us * 1e3) if us else 0.0
        line = f"| {name} | {n} | {us:.1f} | {100 * us / total:.1f}% | {b / 1e6:.1f} | {gbs:.0f} |"
        if copy_gbs:
            line += f" {100 * gbs / copy_gbs:.0f}% |"
        print(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--quantize", default=None, choices=("fp8", "int4", "nvfp4"))
    p.add_argument("--context", type=int, default=128, help="tokens generated before the step")
    p.add_argument("--table", help="read this Nsight Compute CSV and print the table")
    p.add_argument("--copy-gbs", type=float, default=None, help="the device copy rate, GB/s")
    args = p.parse_args(argv)
    if args.table:
        _table(args.table, args.copy_gbs)
    else:
        _profile(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
