"""The bench CLI without a GPU: arguments, saved results, comparison and regressions, Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pygpukit as gp
from pygpukit.benchmark import cli, report
from pygpukit.benchmark.report import Result


def _rows(scale: float = 1.0) -> list[Result]:
    return [
        Result("copy", "1024 MiB", "GB/s", 5e-4, 4250.0 * scale, ceiling_pct=100.0),
        Result(
            "gemm", "bf16 8192^3", "TFLOP/s", 1.4e-3, 789.0 * scale, "torch.matmul", 1.4e-3, 785.0
        ),
    ]


def test_save_load_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    report.save(f, _rows(), {"device": "X"})
    rows, meta = report.load(f)
    assert rows == _rows() and meta == {"device": "X"}
    assert rows[1].ratio == pytest.approx(789.0 / 785.0)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.json does not exist"):
        report.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match=r"bad\.json is not a pygpukit benchmark results file"):
        report.load(bad)


def test_compare_flags_only_slowdowns_beyond_tolerance() -> None:
    old = _rows()
    new = _rows(0.97)  # 3% slower: within 5%
    regs, lines = report.compare(new, old, 0.05)
    assert regs == [] and len(lines) == 2
    new = _rows(0.90)
    regs, _ = report.compare(new, old, 0.05)
    assert [r.key for r in regs] == ["copy/1024 MiB", "gemm/bf16 8192^3"]
    assert regs[0].change == pytest.approx(-0.10)
    regs, _ = report.compare(_rows(1.5), old, 0.0)  # faster is never a regression
    assert regs == []
    with pytest.raises(ValueError, match="tolerance"):
        report.compare(new, old, 1.5)


def test_markdown_table() -> None:
    md = report.markdown(_rows(), {"device": "NVIDIA H200", "driver": "CUDA 13.0"})
    lines = md.strip().splitlines()
    assert lines[0].startswith("Device: NVIDIA H200, driver CUDA 13.0")
    assert lines[2].startswith("| suite | case | pygpukit |")
    assert "| gemm | bf16 8192^3 | 789.0 | TFLOP/s | torch.matmul | 785.0 | 1.01 |" in md


def test_cli_argument_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--dtypes", "bf17"])
    assert e.value.code == 2
    assert "--dtypes takes bf16, fp16, fp32, fp8" in capsys.readouterr().err
    assert cli.main(["--fail-on-regression"]) == 2
    assert "needs --compare" in capsys.readouterr().err
    assert cli.main(["--compare", "/nonexistent/r.json"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the no-GPU path")
def test_cli_without_gpu_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--quick"]) == 2
    assert "need a CUDA device" in capsys.readouterr().err


@pytest.mark.gpu
def test_cli_quick_run_saves_and_compares(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    assert cli.main(["--quick", "--ops", "--save", str(f)]) == 0
    rows, meta = report.load(f)
    assert rows[0].suite == "copy" and rows[0].rate > 100
    assert {r.suite for r in rows} == {"copy", "ops"}
    assert meta["device"] != "?"
    assert cli.main(["--quick", "--ops", "--compare", str(f), "--tolerance", "0.5"]) == 0
