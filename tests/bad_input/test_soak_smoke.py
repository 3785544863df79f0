"""The GPU soak script (benchmarks/soak.py) runs on the CPU for two seconds and passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_soak_smoke_on_cpu() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--seconds", "2",
         "--threads", "2", "--device", "cpu"],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["ok"] and res["unexpected"] == 0 and res["operations"] > 50
    assert res["pool_current_bytes"] == {"default": 0, "soak": 0}
    assert res["failures_by_type"].get("QuotaExceededError", 0) > 0
    assert set(res["failures_by_type"]) <= {
        "OverlapError", "ConversionError", "ArrayTooLargeError", "ValueError", "TypeError",
        "QuotaExceededError",
    }  # fmt: skip
