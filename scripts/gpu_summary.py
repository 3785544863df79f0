"""Print the short summary table of a gpu_check.sh run: test counts, benchmark medians, ratios.

Within each benchmark group the row named like ``*_torch`` is the peer; every other row gets
``peer median / row median`` (above 1.0 = faster than the peer).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def tests_line(path: Path) -> str:
    if not path.exists():
        return "tests: no result file"
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    total, fail = int(suite.get("tests", 0)), int(suite.get("failures", 0))
    err, skip = int(suite.get("errors", 0)), int(suite.get("skipped", 0))
    return f"tests: {total - fail - err - skip} passed, {fail + err} failed, {skip} skipped"


def bench_rows(path: Path) -> list[str]:
    if not path.exists():
        return ["benchmarks: no result file"]
    data = json.loads(path.read_text())
    groups: dict[str, list[tuple[str, float]]] = {}
    for b in data["benchmarks"]:
        groups.setdefault(b.get("group") or "", []).append((b["name"], b["stats"]["median"]))
    rows = [f"{'benchmark':<48} {'median':>12} {'vs peer':>8}"]
    for group, items in groups.items():
        peer = next((m for n, m in items if n.endswith("_torch")), None)
        rows.append(f"[{group}]")
        for name, median in items:
            ratio = f"{peer / median:.2f}x" if peer and not name.endswith("_torch") else ""
            rows.append(f"  {name:<46} {median * 1e6:>9.3f} us {ratio:>8}")
    return rows


def main(out: str) -> int:
    d = Path(out)
    print("\n==== summary ====")
    print((d / "nvidia-smi.txt").read_text().strip() if (d / "nvidia-smi.txt").exists() else "")
    print(tests_line(d / "tests.xml"))
    print("\n".join(bench_rows(d / "bench.json")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
