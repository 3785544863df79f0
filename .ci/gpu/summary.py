"""Print the short summary table of a .ci/gpu/check.sh run: test counts and benchmark results.

Within each benchmark group, rows whose name contains "torch" are the peers; every other row gets
``best peer median / row median`` (above 1.0 = faster than torch's best). Rows with a byte count
get GB/s and the percentage of the device copy bandwidth measured in the same run (the fastest
row of the "copy" group).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def tests_line(path: Path) -> str:
    if not path.exists():
        return f"{path.name}: no result file"
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    total, fail = int(suite.get("tests", 0)), int(suite.get("failures", 0))
    err, skip = int(suite.get("errors", 0)), int(suite.get("skipped", 0))
    return f"{path.stem}: {total - fail - err - skip} passed, {fail + err} failed, {skip} skipped"


def _load(paths: list[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in paths:
        if p.exists():
            out.extend(json.loads(p.read_text())["benchmarks"])
    return out


def bench_rows(paths: list[Path]) -> list[str]:
    benches = _load(paths)
    if not benches:
        return ["benchmarks: no result file"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for b in benches:
        groups.setdefault(b.get("group") or "", []).append(b)
    ceiling = 0.0
    for b in groups.get("copy 1 GiB", []):
        ceiling = max(ceiling, b["extra_info"].get("bytes", 0) / b["stats"]["median"] / 1e9)
    rows = [
        f"{'benchmark':<44} {'median':>11} {'per call':>10} {'GB/s':>7} {'%copy':>6} "
        f"{'vs torch':>8}"
    ]
    for group, items in groups.items():
        peers = [b["stats"]["median"] for b in items if "torch" in b["name"]]
        best_peer = min(peers) if peers else None
        rows.append(f"[{group}]")
        for b in items:
            med = b["stats"]["median"]
            info = b.get("extra_info", {})
            calls = info.get("calls", 1) or 1
            nbytes = info.get("bytes", 0)
            gbs = nbytes / med / 1e9 if nbytes else 0.0
            flops = info.get("flops", 0)
            if flops and not nbytes:  # compute-bound rows: TFLOP/s in the GB/s column
                gbs, pct = 0.0, f"{flops / med / 1e12:.0f}TF"
            if not flops or nbytes:
                pct = f"{100 * gbs / ceiling:.0f}%" if gbs and ceiling else ""
            ratio = f"{best_peer / med:.2f}x" if best_peer and "torch" not in b["name"] else ""
            rows.append(
                f"  {b['name'][5:]:<42} {med * 1e6:>8.1f} us {med / calls * 1e6:>7.2f} us "
                f"{(f'{gbs:.0f}' if gbs else ''):>7} {pct:>6} {ratio:>8}"
            )
            if "pygpukit_tok_s" in info:
                ours, hf = info["pygpukit_tok_s"], info["hf_tok_s"]
                line = (
                    f"    decode: pygpukit {ours:.1f} tok/s, HF eager {hf:.1f} tok/s "
                    f"({ours / hf:.2f}x)"
                )
                if "graph_tok_s" in info:
                    g = info["graph_tok_s"]
                    line += f", graph {g:.1f} tok/s ({g / hf:.2f}x)"
                rows.append(line)
    if ceiling:
        rows.append(f"copy ceiling: {ceiling:.0f} GB/s")
    return rows


def main(out: str) -> int:
    d = Path(out)
    print("\n==== summary ====")
    smi = d / "nvidia-smi.txt"
    print(smi.read_text().strip() if smi.exists() else "")
    for xml in sorted(d.glob("tests*.xml")):
        print(tests_line(xml))
    print("\n".join(bench_rows(sorted(d.glob("bench*.json")))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
