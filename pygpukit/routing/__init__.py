"""The routing table: which backend runs each op, and how users see and override it.

``gp.routing.table()`` prints the table, ``gp.routing.explain("rmsnorm", x, w)`` says which backend
would run and why, ``gp.routing.stats()`` counts what actually ran. Overrides: ``ROUTE`` /
``PYGPUKIT_ROUTE`` env vars, ``gp.set_route(...)``, ``with gp.route(...)`` (see overrides.py for
precedence). ``load_kernels(dir)`` swaps in a user's edited Triton kernel modules.
"""

from __future__ import annotations

import os
from typing import Any

from pygpukit.routing import backends
from pygpukit.routing.overrides import clear_routes, parse, reload_env, route, set_route
from pygpukit.routing.select import (
    Explanation,
    explain,
    invalidate,
    record_timings,
    reset_stats,
    select,
    stats,
    timings,
)
from pygpukit.routing.table import BACKENDS, TABLE, Candidate, OpRoute

__all__ = [
    "BACKENDS",
    "TABLE",
    "Candidate",
    "OpRoute",
    "Explanation",
    "clear_routes",
    "explain",
    "load_kernels",
    "parse",
    "record_timings",
    "reload_env",
    "reset_stats",
    "route",
    "select",
    "set_route",
    "stats",
    "table",
    "table_rows",
    "timings",
    "unserved",
]


def load_kernels(path: str | os.PathLike[str] | None) -> None:
    """Use the Triton kernel modules in ``path`` (``<family>.py``) instead of the shipped ones.

    Takes effect at the next call; ``None`` goes back to the shipped kernels. Same as starting with
    ``PYGPUKIT_TRITON_KERNELS=path``.
    """
    backends.set_kernel_dir(path)
    invalidate()


def unserved(ops: tuple[str, ...] | list[str], device: Any) -> dict[str, str]:
    """{op: why} for each of ``ops`` that no available backend implements on ``device``'s type
    (shape- and dtype-independent: a quick check before committing a whole model to a device)."""
    from pygpukit import runtime

    dev = runtime.device(device)
    gaps: dict[str, str] = {}
    for op in ops:
        route = TABLE[op]
        reasons = []
        for c in route.candidates:
            if dev.type not in c.devices:
                continue
            ok, why = backends.availability(c.backend)
            if ok:
                impl, why = backends.implementation(c.backend, route.family_of(c), op)
                if impl is not None:
                    break
            reasons.append(f"{c.backend}: {why}")
        else:
            gaps[op] = "; ".join(reasons) or f"no backend runs on {dev.type}"
    return gaps


def table_rows() -> list[dict[str, Any]]:
    rows = []
    for op, r in sorted(TABLE.items()):
        cands = []
        for c in r.candidates:
            ok, why = backends.availability(c.backend)
            cands.append(
                {
                    "backend": c.backend,
                    "family": r.family_of(c),
                    "available": ok,
                    "reason": why,
                    "dtypes": sorted(c.dtypes),
                    "devices": sorted(c.devices),
                    "params": dict(c.params),
                }
            )
        rows.append({"op": op, "family": r.family, "candidates": cands})
    return rows


def table(file: Any = None) -> list[dict[str, Any]]:
    """Print the table (op, family, candidates in preference order) and return its rows."""
    rows = table_rows()
    lines = [f"{'op':<18} {'family':<12} candidates (first that can serve wins)"]
    for row in rows:
        parts = []
        for c in row["candidates"]:
            tag = c["backend"] if c["available"] else f"{c['backend']} (unavailable)"
            if c["params"]:
                tag += " " + ",".join(f"{k}={v}" for k, v in c["params"].items())
            parts.append(tag)
        lines.append(f"{row['op']:<18} {row['family']:<12} {' > '.join(parts)}")
    for name in BACKENDS:
        ok, why = backends.availability(name)
        lines.append(f"{name}: {'available' if ok else 'unavailable - ' + why}")
    print("\n".join(lines), file=file)
    return rows
