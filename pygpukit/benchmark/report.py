"""Results of the bench CLI: one row per case, JSON save/load, a comparison against a saved run,
and a Markdown table (the format of BENCHMARKS.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Result", "save", "load", "compare", "markdown", "Regression", "emit"]


@dataclass
class Result:
    suite: str
    name: str  # unique within the suite, e.g. "bf16 8192x8192x8192"
    unit: str  # "GB/s" or "TFLOP/s"
    seconds: float  # pygpukit's median device time per call
    rate: float  # pygpukit's rate in unit
    peer: str = ""  # e.g. "torch.matmul"
    peer_seconds: float | None = None
    peer_rate: float | None = None
    ceiling_pct: float | None = None  # rate as a percentage of the device ceiling of this run
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.name}"

    @property
    def ratio(self) -> float | None:
        """pygpukit's rate over the peer's (> 1: pygpukit faster)."""
        if self.peer_rate is None or self.peer_rate == 0:
            return None
        return self.rate / self.peer_rate


def save(path: str | Path, results: list[Result], meta: dict[str, Any]) -> None:
    doc = {"meta": meta, "results": [asdict(r) for r in results]}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")


def load(path: str | Path) -> tuple[list[Result], dict[str, Any]]:
    try:
        doc = json.loads(Path(path).read_text())
        rows = [Result(**r) for r in doc["results"]]
    except FileNotFoundError:
        raise FileNotFoundError(f"benchmark results file {path} does not exist") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not a pygpukit benchmark results file ({exc})") from None
    return rows, dict(doc.get("meta", {}))


@dataclass
class Regression:
    key: str
    old_rate: float
    new_rate: float
    unit: str

    @property
    def change(self) -> float:
        return self.new_rate / self.old_rate - 1.0

    def __str__(self) -> str:
        return (
            f"{self.key}: {self.old_rate:.1f} -> {self.new_rate:.1f} {self.unit} "
            f"({100 * self.change:+.1f}%)"
        )


def compare(
    new: list[Result], old: list[Result], tolerance: float
) -> tuple[list[Regression], list[str]]:
    """(regressions beyond ``tolerance`` as a fraction, lines describing every matched case)."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    before = {r.key: r for r in old}
    regs: list[Regression] = []
    lines: list[str] = []
    for r in new:
        o = before.get(r.key)
        if o is None or o.unit != r.unit or o.rate <= 0:
            lines.append(f"{r.key}: new ({r.rate:.1f} {r.unit})")
            continue
        reg = Regression(r.key, o.rate, r.rate, r.unit)
        lines.append(str(reg))
        if r.rate < o.rate * (1.0 - tolerance):
            regs.append(reg)
    return regs, lines


def _fmt(v: float | None, digits: int = 1) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def markdown(results: list[Result], meta: dict[str, Any]) -> str:
    head = [
        f"Device: {meta.get('device', '?')}, driver {meta.get('driver', '?')}, "
        f"{meta.get('date', '?')}; command: `{meta.get('command', '?')}`",
        "",
        "| suite | case | pygpukit | unit | peer | peer rate | ratio | % of ceiling | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [
        f"| {r.suite} | {r.name} | {_fmt(r.rate)} | {r.unit} | {r.peer} | {_fmt(r.peer_rate)} "
        f"| {_fmt(r.ratio, 2)} | {_fmt(r.ceiling_pct, 0)} | {r.note} |"
        for r in results
    ]
    return "\n".join(head + rows) + "\n"


def emit(result: dict[str, Any], path: str | Path | None) -> None:
    """A benchmark script's result (benchmarks/*.py): written to ``path`` (indented) when
    given, and printed as one JSON line, the script's last line of output."""
    if path is not None:
        Path(path).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
