"""argparse types for numeric flags: a bad value is a usage error (exit 2) naming the flag."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _int(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{v} is less than {low}")
        return v

    parse.__name__ = f"integer >= {low}"
    return parse


def _float(ok: Callable[[float], bool], want: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if math.isnan(v) or not ok(v):
            raise argparse.ArgumentTypeError(f"{text} is not {want}")
        return v

    parse.__name__ = want
    return parse


non_negative_int = _int(0)
positive_int = _int(1)
non_negative_float = _float(lambda v: 0 <= v < math.inf, "a finite number >= 0")
positive_float = _float(lambda v: 0 < v < math.inf, "a finite number > 0")
fraction = _float(lambda v: 0 < v <= 1, "a number in (0, 1]")
