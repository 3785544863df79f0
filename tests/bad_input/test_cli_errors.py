"""CLI failures: one line on stderr and exit 1; usage errors exit 2; tracebacks only on request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    e.pop("ROUTE", None) if "ROUTE" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "pygpukit", *args],
        capture_output=True, text=True, timeout=120, env=e, cwd=ROOT,
    )  # fmt: skip


USAGE = [
    ("--max-new-tokens", "-1"),
    ("--max-new-tokens", "ten"),
    ("--context", "0"),
    ("--context", "-5"),
    ("--temperature", "nan"),
    ("--temperature", "-1"),
    ("--top-k", "-1"),
    ("--top-p", "0"),
    ("--top-p", "1.5"),
    ("--repetition-penalty", "0"),
    ("--seed", "-1"),
    ("--sm-share", "2"),
]


@pytest.mark.parametrize(("flag", "value"), USAGE)
def test_bad_numeric_flag_is_a_usage_error(flag: str, value: str) -> None:
    r = _cli("chat", flag, value, "--prompt", "hi")
    assert r.returncode == 2
    assert flag in r.stderr and value in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(os.environ.get("PYGPUKIT_DEVICE") == "cuda", reason="needs a CPU-only host")
def test_chat_on_a_missing_gpu_is_one_line() -> None:
    import pygpukit as gp

    if gp.is_cuda_available():
        pytest.skip("the machine has a GPU")
    r = _cli("chat", "--device", "cuda:0", "--prompt", "hi", "--quiet")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "cuda:0" in r.stderr and "NoDeviceError" in r.stderr


@pytest.mark.parametrize("var", ["ROUTE", "PYGPUKIT_ROUTE"])
def test_routes_with_a_bad_env_rule_is_one_line(var: str) -> None:
    r = _cli("routes", **{var: "rmsnorm:warp"})
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "warp" in r.stderr and "RouteError" in r.stderr
    ok = _cli("routes")
    assert ok.returncode == 0 and "rmsnorm" in ok.stdout


@pytest.mark.parametrize(("how", "env"), [("--debug", {}), ("", {"PYGPUKIT_DEBUG": "1"})])
def test_debug_shows_the_traceback(how: str, env: dict[str, str]) -> None:
    args = [how] if how else []
    r = _cli(*args, "routes", ROUTE="rmsnorm:warp", **env)
    assert r.returncode == 1 and "Traceback" in r.stderr and "RouteError" in r.stderr


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`python -m pygpukit routes | head -1`: a closed pipe ends the command quietly, exit 0 (the
    reader is gone before the first write, so the write fails for certain)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pygpukit", "routes"],
            stdout=w, stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        os.close(w)
    assert p.returncode == 0 and p.stderr == "", p.stderr
