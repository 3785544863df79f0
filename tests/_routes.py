"""Test helper: a backend's implementation of an op by the routing table's lookup rule."""

from __future__ import annotations

from typing import Any

from pygpukit.routing.backends import implementation
from pygpukit.routing.table import TABLE


def native_impl(op: str) -> tuple[Any, str]:
    """The native backend's implementation of ``op``: (fn, "") or (None, why not)."""
    route = TABLE.get(op)
    return implementation("native", route.family if route is not None else op, op)
