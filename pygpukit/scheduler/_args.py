"""Argument checks shared by the scheduler's Python surface: the wrong type is a TypeError, a
value out of range a ValueError, each naming the argument (the Rust core checks ranges again)."""

from __future__ import annotations

from typing import Any


def nonneg_int(name: str, v: Any) -> int:
    """``v`` as a byte count or count: an int (not a bool) >= 0."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {v!r}")
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def optional_int(name: str, v: Any) -> int | None:
    return None if v is None else nonneg_int(name, v)


def number(name: str, v: Any) -> float:
    """``v`` as a float: an int or float (not a bool); ranges are the caller's."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a number, got {v!r}")
    return float(v)


def share(name: str, v: Any) -> float:
    """A fraction in (0, 1]."""
    x = number(name, v)
    if not 0.0 < x <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {v!r}")
    return x
