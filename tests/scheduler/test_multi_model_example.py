"""examples/multi_model.py runs end to end (tiny random models on the CPU simulation): both
models' tokens beside the batch job equal their solo runs, and the table and snapshot print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "multi_model.py"


def test_multi_model_tiny_on_cpu() -> None:
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--tiny", "--tokens", "10", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        # The checkout's package, also where it is not installed (the GPU host runs the tree).
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    rows: dict[str, str] = {}
    for ln in lines:  # the first table (the snapshot's context table comes later)
        if ln.split() and ln.split()[0] in ("chat", "second"):
            rows.setdefault(ln.split()[0], ln)
    assert rows["chat"].split()[1] == "guaranteed" and rows["chat"].endswith("yes")
    assert rows["second"].split()[1] == "burstable" and rows["second"].endswith("yes")
    assert any(ln.startswith("batch ") and "matmuls/s" in ln for ln in lines)
    assert "task 'chat decode' of context 'chat': admitted" in r.stdout
