"""Sweep sdpa_decode's tuning knobs on the GPU and print GB/s tables.

    python benchmarks/tuning/tune_decode.py                 # both stages, all shapes and layouts
    python benchmarks/tuning/tune_decode.py --stage kernel  # BLOCK_N x NUM_WARPS x NUM_STAGES only
    python benchmarks/tuning/tune_decode.py --stage split --shapes 1x4096,1x32768 --json out.json
    python benchmarks/tuning/tune_decode.py --stage split --set BLOCK_N=128,NUM_STAGES=2
                                                            # (stage 1's pick)
    python benchmarks/tuning/tune_decode.py --stage few --shapes 1x4096,1x16384,1x32768,16x4096

Shapes: bf16, 32 query / 8 KV heads, D128, one query token, every sequence at the full context
(batch x context from --shapes), layouts contiguous / paged16 / paged64 (random block tables).
GB/s counts the K and V bytes read once; %copy is against a 1 GiB device-to-device copy timed in
the same run (CUDA events, L2 flushed before every round, median; pygpukit.benchmark.timing).

Stage "kernel" sweeps the kernel shape (BLOCK_N, NUM_WARPS, NUM_STAGES) with the default split
policy; stage "split" then sweeps the split policy (PROGRAMS_PER_SM, MIN_SPLIT_KEYS,
FUSED_COMBINE, COMBINE_ELEMS) with the best kernel shape of stage 1 (geometric mean over all
columns). Stages "few-kernel" and "few-split" ("few": both) do the same for the few-programs
class's knobs (FEW_*: contiguous caches at batch 1-4, see attention_decode.py), ranked by the
geometric mean over the columns that class serves (the plan line of each shape says which).
Every configuration is checked against the default configuration's output (a broken
combination shows as "BAD"); one that does not compile (shared memory) shows as "n/a". The knobs
are the module constants of pygpukit/backends/triton_kernels/attention_decode.py: copy the
winners there.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import pygpukit as gp
from pygpukit.backends.triton_kernels import attention_decode as ad
from pygpukit.benchmark.timing import DeviceTimer

H, HKV, D = 32, 8, 128
LAYOUTS = ("contiguous", "paged16", "paged64")
KERNEL_GRID = {"BLOCK_N": (32, 64, 128), "NUM_WARPS": (4, 8), "NUM_STAGES": (2, 3, 4)}
SPLIT_GRID = {
    "PROGRAMS_PER_SM": (1, 2, 3, 4, 6, 8),
    "MIN_SPLIT_KEYS": (128, 256, 512, 1024),
    "FUSED_COMBINE": (True, False),
    "COMBINE_ELEMS": (2048, 4096, 8192),
}
FEW_KERNEL_GRID = {
    "FEW_BLOCK_N": (32, 64, 128),
    "FEW_NUM_WARPS": (4, 8),
    "FEW_NUM_STAGES": (2, 3, 4),
}
FEW_SPLIT_GRID = {
    "FEW_PROGRAMS_PER_SM": (1, 2, 3),
    "FEW_MIN_SPLIT_KEYS": (64, 128, 256, 512),
    "FEW_FUSED_COMBINE": (True, False),
    "FEW_PAGED": (False, True),
}
ALL_GRIDS = (KERNEL_GRID, SPLIT_GRID, FEW_KERNEL_GRID, FEW_SPLIT_GRID)


def _rand(shape: tuple[int, ...], seed: int) -> gp.GPUArray:
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return gp.from_numpy(x, device="cuda:0").astype("bfloat16")


class Shape:
    """Inputs of one (batch, context): the caches, and paged views of the same memory."""

    def __init__(self, b: int, s: int) -> None:
        self.b, self.s = b, s
        self.q = _rand((b, H, 1, D), 1)
        self.k = gp.empty((b, HKV, s, D), "bfloat16", device="cuda:0")
        self.v = gp.empty((b, HKV, s, D), "bfloat16", device="cuda:0")
        rk, rv = _rand((1, HKV, s, D), 2), _rand((1, HKV, s, D), 3)
        for i in range(b):  # one random sequence per row: values do not change the timing
            self.k[i : i + 1] = rk
            self.v[i : i + 1] = rv
        self.lens = gp.from_numpy(np.full(b, s, np.int32), device="cuda:0")
        self.out = gp.empty_like(self.q)
        self.bytes = 2 * b * HKV * s * D * 2

    def call(self, layout: str) -> Callable[[], Any]:
        if layout == "contiguous":
            return lambda: gp.sdpa_decode(self.q, self.k, self.v, self.lens, out=self.out)
        page = int(layout.removeprefix("paged"))
        per = self.s // page
        perm = np.random.default_rng(4).permutation(self.b * per).reshape(self.b, per)
        table = gp.from_numpy(perm.astype(np.int32), device="cuda:0")
        kp = self.k.reshape(self.b * per, HKV, page, D)
        vp = self.v.reshape(self.b * per, HKV, page, D)
        return lambda: gp.sdpa_decode(self.q, kp, vp, self.lens, block_table=table, out=self.out)


def _set(knobs: dict[str, Any]) -> None:
    for name, value in knobs.items():
        setattr(ad, name, value)


def _run_config(
    timer: DeviceTimer, shapes: list[Shape], layouts: list[str], knobs: dict[str, Any],
    refs: dict[tuple[int, int, str], np.ndarray], rounds: int,
) -> dict[str, float | str]:  # fmt: skip
    """GB/s per column, or "n/a" (does not compile) / "BAD" (wrong result)."""
    saved = {k: getattr(ad, k) for k in knobs}
    _set(knobs)
    row: dict[str, float | str] = {}
    try:
        for sh in shapes:
            for layout in layouts:
                col = f"B{sh.b} S{sh.s} {layout}"
                fn = sh.call(layout)
                try:
                    fn()
                except Exception as exc:  # out of shared memory / registers for this shape
                    row[col] = "n/a"
                    print(f"    {col}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                    continue
                got = sh.out.to_numpy().astype(np.float32)
                key = (sh.b, sh.s, layout)
                ref = refs.setdefault(key, got)
                err = float(np.abs(got - ref).max())
                if not np.isfinite(got).all() or err > 2e-2 * float(np.abs(ref).max()):
                    row[col] = "BAD"
                    continue
                t = timer.median_seconds(fn, rounds=rounds)
                row[col] = sh.bytes / t / 1e9
    finally:
        _set(saved)
    return row


def _geomean(row: dict[str, float | str], cols: list[str] | None = None) -> float:
    vals = [v for c, v in row.items() if isinstance(v, float) and (cols is None or c in cols)]
    if len(vals) < (len(row) if cols is None else len(cols)) or not vals:
        return 0.0
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _table(
    title: str, rows: list[tuple[str, dict[str, float | str]]], ceiling: float,
    rank: list[str] | None = None,
) -> None:  # fmt: skip
    """Rows sorted by the geometric mean over the columns in rank (all when None)."""
    cols = list(rows[0][1])
    width = max(len(name) for name, _ in rows) + 2
    print(f"\n== {title} (GB/s of KV bytes, % of the {ceiling:.0f} GB/s copy) ==")
    print(" " * width + "".join(f"{c:>26}" for c in cols) + f"{'geomean':>10}")
    for name, row in sorted(rows, key=lambda r: -_geomean(r[1], rank)):
        cells = []
        for c in cols:
            v = row[c]
            pct = f"({100 * v / ceiling:3.0f}%)" if isinstance(v, float) else ""
            cells.append(f"{v:>26}" if isinstance(v, str) else f"{v:>19.0f} {pct}")
        print(f"{name:<{width}}" + "".join(cells) + f"{_geomean(row, rank):>10.0f}")


def _peers(timer: DeviceTimer, shapes: list[Shape], rounds: int) -> None:
    try:
        import torch
    except ImportError:
        return
    f = torch.nn.functional.scaled_dot_product_attention
    line = []
    for sh in shapes:
        tq, tk, tv = (torch.from_dlpack(t) for t in (sh.q, sh.k, sh.v))
        t = timer.median_seconds(
            lambda tq=tq, tk=tk, tv=tv: f(tq, tk, tv, enable_gqa=True), rounds=rounds
        )
        line.append(f"B{sh.b} S{sh.s}: {sh.bytes / t / 1e9:.0f} GB/s")
    print("torch SDPA (contiguous): " + ", ".join(line))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--stage", choices=("kernel", "split", "few-kernel", "few-split", "few", "all"),
        default="all",
    )  # fmt: skip
    p.add_argument("--shapes", default="1x4096,1x16384,1x32768,16x4096,16x16384,16x32768")
    p.add_argument("--layouts", default=",".join(LAYOUTS))
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--json", default="")
    p.add_argument("--set", default="", help="knobs to start from, e.g. BLOCK_N=128,NUM_WARPS=8")
    a = p.parse_args()
    if not gp.is_cuda_available():
        print("tune_decode: no CUDA device")
        return 1
    for kv in filter(None, a.set.split(",")):
        name, value = kv.split("=")
        old = getattr(ad, name)  # AttributeError names a knob that does not exist
        setattr(ad, name, value == "True" if isinstance(old, bool) else type(old)(value))
    timer = DeviceTimer(0)
    shapes = [Shape(*(int(x) for x in s.split("x"))) for s in a.shapes.split(",")]
    layouts = a.layouts.split(",")
    ceiling = timer.copy_rate()
    print(f"device: {gp.get_device_properties(0).get('name')}; copy 1 GiB: {ceiling:.0f} GB/s")
    default = {k: getattr(ad, k) for grid in ALL_GRIDS for k in grid}
    print(f"defaults: {default}")
    for sh in shapes:
        for layout in layouts:
            page = 0 if layout == "contiguous" else int(layout.removeprefix("paged"))
            pl = ad.decode_plan(sh.b, H, HKV, 1, D, sh.s, True, ad.sm_count(sh.q), page=page)
            print(
                f"  B{sh.b} S{sh.s} {layout}: {pl.splits} splits of {pl.chunk} keys, "
                f"{'few-programs' if pl.few else 'default'} class"
            )
    _peers(timer, shapes, a.rounds)
    refs: dict[tuple[int, int, str], np.ndarray] = {}
    results: dict[str, Any] = {"ceiling_gbs": ceiling, "defaults": default}
    base = _run_config(timer, shapes, layouts, {}, refs, a.rounds)  # the reference outputs
    few_cols = [
        f"B{sh.b} S{sh.s} {layout}"
        for sh in shapes
        for layout in layouts
        if layout == "contiguous"
        and ad.decode_plan(sh.b, H, HKV, 1, D, sh.s, True, ad.sm_count(sh.q)).few
    ]
    if a.stage.startswith("few") and not few_cols:
        print("tune_decode: no shape is in the few-programs class (try --shapes 1x4096,...)")
        return 1
    stages = {
        "few": ("few-kernel", "few-split"),
        "all": ("kernel", "split", "few-kernel", "few-split"),
    }.get(a.stage, (a.stage,))
    best: dict[str, Any] = {}
    few_best: dict[str, Any] = {}
    for stage in stages:
        few = stage.startswith("few")
        grid = {
            "kernel": KERNEL_GRID,
            "split": SPLIT_GRID,
            "few-kernel": FEW_KERNEL_GRID,
            "few-split": FEW_SPLIT_GRID,
        }[stage]
        start = (few_best if few else best) if stage.endswith("split") else {}
        rank = few_cols if few else None
        rows = [("default", base)]
        tried = []
        for values in itertools.product(*grid.values()):
            knobs = dict(zip(grid, values, strict=True))
            name = " ".join(f"{k}={v}" for k, v in knobs.items())
            print(f"  {name}")
            row = _run_config(timer, shapes, layouts, start | knobs, refs, a.rounds)
            rows.append((name, row))
            tried.append(knobs)
        title = {
            "kernel": "kernel shape",
            "split": f"split policy with {best or 'default kernel shape'}",
            "few-kernel": "few-programs class kernel shape",
            "few-split": f"few-programs class split policy with {few_best or 'default shape'}",
        }[stage]
        if few:
            title += f", ranked on {', '.join(few_cols)}"
        _table(title, rows, ceiling, rank)
        results[stage] = rows
        if stage.endswith("kernel"):
            pick = max(zip(tried, rows[1:], strict=True), key=lambda t: _geomean(t[1][1], rank))
            if few:
                few_best = pick[0]
            else:
                best = pick[0]
            print(f"best {'few-programs class ' if few else ''}kernel shape: {pick[0]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
