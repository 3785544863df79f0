"""``python -m pygpukit bench``: the benchmark CLI (pygpukit/benchmark/cli.py) as a subcommand."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def run(args: argparse.Namespace) -> int:
    from pygpukit.benchmark import cli

    argv = sys.argv[sys.argv.index("bench") + 1 :] if "bench" in sys.argv else []
    return cli.run(args, argv)


def add_parser(sub: Any) -> None:
    from pygpukit.benchmark import cli

    p = sub.add_parser("bench", help="device-timed benchmarks next to torch (same run)")
    cli.add_arguments(p)
    p.set_defaults(func=run)
