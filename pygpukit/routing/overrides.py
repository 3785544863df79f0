"""Route overrides: env vars, ``set_route`` and ``with gp.route(...)``.

Precedence, highest first: the innermost ``with gp.route(...)`` block on this thread, then
``gp.set_route(...)``, then ``PYGPUKIT_ROUTE``, then ``ROUTE``, then the table's own order. Within
one layer a rule for the op beats the ``*`` wildcard. ``PYGPUKIT_ROUTE`` wins over ``ROUTE``
because it is the namespaced variable (``ROUTE`` is the short form for interactive use).

Syntax: ``op:backend[,op:backend...]``, e.g. ``ROUTE=rmsnorm:native,softmax:triton`` or
``*:native``.
A backend name ``auto`` clears a rule in that layer. Unknown ops or backends raise RouteError when
parsed, listing the valid names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pygpukit.errors import RouteError
from pygpukit.routing.table import BACKENDS, TABLE

__all__ = ["parse", "forced_backend", "route", "set_route", "clear_routes", "env_rules"]


def _check(op: str, backend: str, source: str) -> None:
    if op != "*" and op not in TABLE:
        raise RouteError(f"{source}: unknown op {op!r}; valid ops: *, {', '.join(sorted(TABLE))}")
    if backend not in (*BACKENDS, "auto"):
        raise RouteError(
            f"{source}: unknown backend {backend!r} for {op}; valid: {', '.join(BACKENDS)}, auto"
        )


def parse(spec: str, source: str = "route") -> dict[str, str]:
    """Parse ``op:backend,...`` into {op: backend}; raises RouteError naming what is wrong."""
    rules: dict[str, str] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        op, sep, backend = item.partition(":")
        op, backend = op.strip(), backend.strip()
        if not sep or not op or not backend:
            raise RouteError(f"{source}: {item!r} is not of the form op:backend")
        _check(op, backend, source)
        rules[op] = backend
    return rules


def _normalize(rules: dict[str, str], source: str) -> dict[str, str]:
    for op, backend in rules.items():
        if not isinstance(backend, str):
            raise RouteError(f"{source}: backend for {op} must be a string, got {backend!r}")
        _check(op, backend, source)
    return dict(rules)


_env: list[tuple[str, dict[str, str]]] | None = None


def env_rules() -> list[tuple[str, dict[str, str]]]:
    """[(variable, rules)] highest precedence first; read once (``reload_env`` re-reads)."""
    global _env
    if _env is None:
        layers = []
        for var in ("PYGPUKIT_ROUTE", "ROUTE"):
            spec = os.environ.get(var)
            if spec:
                layers.append((var, parse(spec, var)))
        _env = layers
    return _env


def reload_env() -> None:
    global _env
    _env = None
    env_rules()


# Decisions are cached per forced backend (select.py keys on forced_backend(op)), so changing
# an override needs no cache invalidation.
_global: dict[str, str] = {}


def set_route(spec: str | None = None, **rules: str) -> None:
    """Process-wide overrides: ``set_route("rmsnorm:native")`` or ``set_route(rmsnorm="native")``.

    ``backend="auto"`` removes a rule. ``set_route()`` with no arguments is a no-op; use
    ``clear_routes()`` to drop them all.
    """
    new = parse(spec, "set_route") if spec else {}
    new.update(_normalize(rules, "set_route"))
    for op, backend in new.items():
        if backend == "auto":
            _global.pop(op, None)
        else:
            _global[op] = backend


def clear_routes() -> None:
    _global.clear()


class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list[dict[str, str]] = []


_local = _Local()


@contextmanager
def route(spec: str | None = None, **rules: str) -> Iterator[None]:
    """``with gp.route(rmsnorm="native"):`` or ``with gp.route("*:native"):`` on this thread."""
    layer = parse(spec, "route") if spec else {}
    layer.update(_normalize(rules, "route"))
    _local.stack.append(layer)
    try:
        yield
    finally:
        _local.stack.pop()


def _lookup(layer: dict[str, str], op: str) -> tuple[str | None, str]:
    backend = layer.get(op)
    key = op
    if backend is None:
        backend, key = layer.get("*"), "*"
    return backend, key


def forced_backend(op: str) -> tuple[str | None, str]:
    """(backend, where the rule comes from) or (None, "") when no override applies to ``op``."""
    env = _env if _env is not None else env_rules()
    if not _local.stack and not _global and not env:  # the common case: nothing overridden
        return None, ""
    for layer in reversed(_local.stack):
        backend, key = _lookup(layer, op)
        if backend is not None:
            return _result(backend, key, "with gp.route")
    for source, layer in (("gp.set_route", _global), *env):
        backend, key = _lookup(layer, op)
        if backend is not None:
            return _result(backend, key, source)
    return None, ""


def named_backend(op: str) -> str | None:
    """The backend a rule naming ``op`` itself forces (not a ``*`` rule), or None."""
    backend, where = forced_backend(op)
    return backend if backend is not None and f"({op}:" in where else None


def _result(backend: str, key: str, source: str) -> tuple[str | None, str]:
    return (None, "") if backend == "auto" else (backend, f"{source} ({key}:{backend})")
