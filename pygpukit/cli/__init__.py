"""``python -m pygpukit <command>``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from pygpukit.cli import bench, chat, info, kernels, routes, sched

    parser = argparse.ArgumentParser(prog="python -m pygpukit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info.add_parser(sub)
    routes.add_parser(sub)
    kernels.add_parser(sub)
    chat.add_parser(sub)
    bench.add_parser(sub)
    sched.add_parser(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
