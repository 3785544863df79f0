"""``python -m pygpukit sched``: the scheduler of a device, and admission explained.

Prints the device's capacity, SM partitions and pacing gate, then admits the contexts given
with --context (in order, as create_context would, on this process's scheduler) and the tasks
given with --task, and prints the resulting contexts, tasks and every admission decision with
its reason. A refused context is reported as a decision, not an error. Without a GPU it runs the
CPU simulation.

  --context NAME[,qos=guaranteed|burstable|best_effort][,max_vram=4GB][,reservation=1GB]
            [,sm_share=0.5][,priority=N][,pace=0.5|none]
  --task CONTEXT[,name=N][,memory=2GB][,priority=N]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pygpukit._units import parse_bytes

_CTX_KEYS = ("qos", "max_vram", "reservation", "sm_share", "priority", "pace")
_TASK_KEYS = ("name", "memory", "priority")


def _fields(text: str, keys: tuple[str, ...], what: str) -> tuple[str, dict[str, str]]:
    first, *rest = [p.strip() for p in text.split(",")]
    if not first or "=" in first:
        raise ValueError(f"--{what} {text!r}: it must start with a name")
    kv: dict[str, str] = {}
    for part in rest:
        key, eq, value = part.partition("=")
        if not eq or key not in keys:
            raise ValueError(
                f"--{what} {text!r}: {part!r} is not KEY=VALUE with KEY one of {', '.join(keys)}"
            )
        kv[key] = value
    return first, kv


def _context_kwargs(kv: dict[str, str], spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        for k, v in kv.items():
            if k in ("max_vram", "reservation"):
                out[k] = parse_bytes(v)
            elif k == "sm_share":
                out[k] = float(v)
            elif k == "priority":
                out[k] = int(v)
            elif k == "pace":
                out[k] = None if v.lower() == "none" else float(v)
            else:
                out[k] = v
    except ValueError as e:
        raise ValueError(f"--context {spec!r}: {e}") from None
    return out


def run(args: argparse.Namespace) -> int:
    from pygpukit import scheduler
    from pygpukit.errors import AdmissionError, NoDeviceError
    from pygpukit.scheduler.report import format_snapshot

    try:
        contexts = [_fields(c, _CTX_KEYS, "context") for c in args.context]
        tasks = [_fields(t, _TASK_KEYS, "task") for t in args.task]
        pairs = zip(contexts, args.context, strict=True)
        ctx_kwargs = [(n, _context_kwargs(kv, spec)) for (n, kv), spec in pairs]
        sched = scheduler.initialize(
            args.device if args.device is not None else 0, sm_count=args.sm_count
        )
    except (ValueError, TypeError, NoDeviceError) as e:
        print(f"sched: {e}", file=sys.stderr)
        return 2
    for name, kw in ctx_kwargs:
        try:
            sched.create_context(name, **kw)
        except AdmissionError:
            pass  # shown with its reason among the decisions
        except (ValueError, TypeError) as e:
            print(f"sched: --context {name}: {e}", file=sys.stderr)
            return 2
    for (ctx, kv), spec in zip(tasks, args.task, strict=True):
        try:
            memory = parse_bytes(kv.get("memory", "0"))
            priority = int(kv["priority"]) if "priority" in kv else None
            sched.core.submit(ctx, kv.get("name", ""), memory, priority)
        except AdmissionError:
            pass
        except ValueError as e:
            print(f"sched: --task {spec!r}: {e}", file=sys.stderr)
            return 2
    snap = sched.snapshot()
    if args.json:
        print(json.dumps(snap, indent=2, default=str))
    else:
        print(format_snapshot(snap))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sched",
        help="the scheduler: contexts, SM partitions, pacing, admission decisions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--device", help="cuda:N or cpu (default: device 0, simulated without a GPU)")
    p.add_argument("--context", action="append", default=[], help="admit a context (see above)")
    p.add_argument("--task", action="append", default=[], help="submit a task (see above)")
    p.add_argument(
        "--sm-count", type=int, help="SMs the CPU simulation plans shares against (no GPU)"
    )
    p.add_argument("--json", action="store_true", help="the snapshot as JSON")
    p.set_defaults(func=run)
