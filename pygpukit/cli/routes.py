"""``python -m pygpukit routes``: the routing table, backend availability and active overrides."""

from __future__ import annotations

import argparse
import json
from typing import Any


def run(args: argparse.Namespace) -> int:
    from pygpukit import routing
    from pygpukit.routing.overrides import env_rules

    rules = env_rules()  # a bad ROUTE / PYGPUKIT_ROUTE fails here, before any output
    if args.json:
        print(
            json.dumps(
                {"table": routing.table_rows(), "env": dict(rules)},
                indent=2,
            )
        )
        return 0
    routing.table()
    for var, r in rules:
        print(f"{var}: " + ", ".join(f"{op}:{b}" for op, b in r.items()))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("routes", help="the routing table and active overrides")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
