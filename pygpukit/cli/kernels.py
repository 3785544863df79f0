"""``python -m pygpukit kernels list | eject FAMILY DIR``: the Triton kernel modules, and a copy
of one to edit (then run with ``PYGPUKIT_TRITON_KERNELS=DIR``; nothing is recompiled by hand)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import pygpukit.backends.triton_kernels as shipped_pkg

SHIPPED = Path(shipped_pkg.__file__).parent


def families() -> list[str]:
    """Shipped kernel modules (private helpers start with "_"; driver.py is the launcher)."""
    return sorted(
        p.stem for p in SHIPPED.glob("*.py") if not p.stem.startswith("_") and p.stem != "driver"
    )


def run_list(args: argparse.Namespace) -> int:
    from pygpukit.routing import backends

    user = backends.kernel_dir()
    for fam in families():
        mine = user / f"{fam}.py" if user else None
        where = f"{mine} (user)" if mine and mine.is_file() else str(SHIPPED / f"{fam}.py")
        print(f"{fam:<12} {where}")
    return 0


def run_eject(args: argparse.Namespace) -> int:
    fam = args.family
    if fam not in families():
        raise SystemExit(f"unknown kernel family {fam!r}; choose from: {', '.join(families())}")
    dest_dir = Path(args.dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / f"{fam}.py"
    if dest.exists() and not args.force:
        raise SystemExit(f"{dest} exists; pass --force to overwrite it")
    shutil.copyfile(SHIPPED / f"{fam}.py", dest)
    print(f"copied {SHIPPED / f'{fam}.py'} -> {dest}")
    print(
        f"edit it, then run with PYGPUKIT_TRITON_KERNELS={dest_dir.resolve()} "
        f"(or gp.routing.load_kernels({str(dest_dir.resolve())!r}))"
    )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("kernels", help="list Triton kernel modules, or eject one to edit")
    ks = p.add_subparsers(dest="kernels_command", required=True)
    lp = ks.add_parser("list", help="each kernel family and the file that serves it")
    lp.set_defaults(func=run_list)
    ep = ks.add_parser("eject", help="copy a shipped kernel module into DIR to edit")
    ep.add_argument("family")
    ep.add_argument("dir")
    ep.add_argument("--force", action="store_true", help="overwrite an existing copy")
    ep.set_defaults(func=run_eject)
