"""Byte counts for people: ``fmt_bytes`` prints them, ``parse_bytes`` reads "4GB", "512MiB",
"1.5 GiB" or a plain integer. Binary units either way (1 GB = 1 GiB = 2**30 bytes, as 0.2.x's
``pygpukit.scheduler.GB``)."""

from __future__ import annotations

import re

__all__ = ["fmt_bytes", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def parse_bytes(text: str) -> int:
    """An integer byte count from "4GB", "512 MiB", "1.5g", "4096", "4096B" (ValueError
    otherwise; a fraction needs a unit of at least KiB and must come to whole bytes)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:([kmgt])(?:i?b)?|b)?\s*", str(text), re.I)
    if m is None:
        raise ValueError(f"not a byte count: {text!r} (examples: 4096, 512MB, 4GiB, 1.5GB)")
    value = float(m.group(1)) * _UNITS[(m.group(2) or "").lower()]
    if value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)
