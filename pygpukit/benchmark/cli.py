"""``python -m pygpukit.benchmark`` (also ``python -m pygpukit bench``): device-timed benchmarks
of pygpukit next to torch measured in the same run, saved as JSON, compared against a saved run.

    python -m pygpukit.benchmark [--quick] [--gemm] [--gemv] [--attention] [--ops]
        [--sizes 4096,8192] [--dtypes bf16,fp8] [--save F.json]
        [--compare F.json [--fail-on-regression] [--tolerance 0.05]] [--markdown]

Without a suite flag it runs ops + gemm. The copy ceiling runs first in every run, and each rate
is also reported as a percentage of it. Exit codes: 0 ok, 1 a regression beyond the tolerance
with --fail-on-regression, 2 bad arguments or no CUDA device.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from pygpukit.benchmark import report

__all__ = ["main", "add_arguments", "run"]

SUITE_FLAGS = ("ops", "gemm", "gemv", "attention")


def _ints(text: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        msg = f"--sizes takes comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"--sizes needs positive sizes, got {text!r}")
    return vals


def _dtypes(text: str) -> list[str]:
    from pygpukit.benchmark.cases import DTYPE_NAMES

    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in DTYPE_NAMES]
    if not vals or bad:
        raise argparse.ArgumentTypeError(f"--dtypes takes {', '.join(DTYPE_NAMES)}; got {text!r}")
    return vals


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="fewer rounds and smaller inputs")
    for name in SUITE_FLAGS:
        p.add_argument(f"--{name}", action="store_true", help=f"run the {name} suite")
    p.add_argument("--sizes", type=_ints, default=[4096, 8192], help="GEMM sizes (n for n^3)")
    p.add_argument(
        "--dtypes", type=_dtypes, default=["bf16"], help="GEMM dtypes: bf16,fp16,fp32,fp8"
    )
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--save", metavar="F.json", help="write the results as JSON")
    p.add_argument("--compare", metavar="F.json", help="compare with a saved run")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case is slower than the saved run beyond --tolerance",
    )
    p.add_argument(
        "--tolerance", type=float, default=0.05, help="allowed slowdown fraction (default 0.05)"
    )
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")


def _meta(device: int, argv: Sequence[str]) -> dict[str, Any]:
    from pygpukit import _core

    props = _core.device_properties(device)
    ver = int(_core.driver_version())
    return {
        "device": str(props.get("name", "?")),
        "driver": f"CUDA {ver // 1000}.{(ver % 1000) // 10}",
        "date": datetime.date.today().isoformat(),
        "command": "python -m pygpukit.benchmark " + shlex.join(list(argv)),
    }


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    import pygpukit as gp
    from pygpukit.benchmark.cases import Options, run_suites

    if args.fail_on_regression and not args.compare:
        print("--fail-on-regression needs --compare F.json", file=sys.stderr)
        return 2
    if not 0 <= args.tolerance < 1:
        print(f"--tolerance must be in [0, 1), got {args.tolerance}", file=sys.stderr)
        return 2
    old: list[report.Result] | None = None
    if args.compare:
        try:
            old, _ = report.load(args.compare)
        except (FileNotFoundError, ValueError) as exc:
            print(str(exc), file=sys.stderr)
            return 2
    if not gp.is_cuda_available():
        print("benchmarks need a CUDA device; none is available", file=sys.stderr)
        return 2
    suites = [s for s in SUITE_FLAGS if getattr(args, s)] or ["ops", "gemm"]
    opts = Options(quick=args.quick, sizes=args.sizes, dtypes=args.dtypes)
    results = run_suites(suites, opts, device=args.device)
    meta = _meta(args.device, argv)
    if args.markdown:
        print(report.markdown(results, meta))
    else:
        for r in results:
            peer = f"  {r.peer} {r.peer_rate:.1f} (x{r.ratio:.2f})" if r.ratio is not None else ""
            pct = f"  {r.ceiling_pct:.0f}% of copy" if r.ceiling_pct is not None else ""
            print(f"{r.key:<48} {r.rate:9.1f} {r.unit}{peer}{pct} {r.note}")
    if args.save:
        report.save(args.save, results, meta)
    if old is not None:
        regs, lines = report.compare(results, old, args.tolerance)
        print("\n".join(["compared with " + args.compare + ":", *lines]))
        if regs:
            print(f"{len(regs)} regression(s) beyond {100 * args.tolerance:.0f}%:")
            print("\n".join(f"  {r}" for r in regs))
            if args.fail_on_regression:
                return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m pygpukit.benchmark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_arguments(p)
    return run(p.parse_args(argv), argv)
