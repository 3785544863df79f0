"""``python -m pygpukit transcribe`` end to end with the tiny Whisper checkpoint, and its
errors (usage errors exit 2, failures exit 1 with one line naming the problem)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from pygpukit.cli import main

from ._whisper import WHISPER_DIR, case_audio, whisper_golden


def _wav(tmp_path: Any) -> Any:
    sf = pytest.importorskip("soundfile")
    path = tmp_path / "speech.wav"
    c = whisper_golden()["cases"]["timestamps_en"]
    sf.write(path, case_audio("timestamps_en", c), 16000, subtype="FLOAT")
    return path


def test_transcribe_subprocess_with_timestamps(tmp_path: Any) -> None:
    from pygpukit.models.whisper import load_whisper, transcribe

    wav = _wav(tmp_path)
    cmd = [sys.executable, "-m", "pygpukit", "transcribe", str(wav), "--model", str(WHISPER_DIR)]
    cmd += ["--language", "en", "--timestamps", "--device", "cpu", "--max-new-tokens", "24"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    want = transcribe(
        load_whisper(WHISPER_DIR, device="cpu"),
        wav,
        language="en",
        timestamps=True,
        max_new_tokens=24,
    )
    lines = p.stdout.splitlines()
    assert lines[0] == want.text.strip()
    assert len(lines) == 1 + len(want.segments)
    first = want.segments[0]
    assert lines[1].startswith(f"[{first.start:7.2f} --> {first.end:7.2f}]")
    assert "language: en" in p.stderr


def test_transcribe_main_detects_language(tmp_path: Any, capsys: Any) -> None:
    wav = _wav(tmp_path)
    code = main(
        [
            "transcribe",
            str(wav),
            "--model",
            str(WHISPER_DIR),
            "--device",
            "cpu",
            "--max-new-tokens",
            "4",
        ]
    )
    assert code == 0
    assert "language: en" in capsys.readouterr().err


def test_transcribe_errors(tmp_path: Any, capsys: Any) -> None:
    wav = _wav(tmp_path)
    assert main(["transcribe", str(tmp_path / "nope.wav"), "--model", str(WHISPER_DIR)]) == 1
    assert "FileNotFoundError" in capsys.readouterr().err
    assert main(["transcribe", str(wav), "--model", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "ModelLoadError" in err and "config.json is missing" in err
    assert (
        main(
            [
                "transcribe",
                str(wav),
                "--model",
                str(WHISPER_DIR),
                "--language",
                "xx",
                "--device",
                "cpu",
            ]
        )
        == 1
    )
    assert "language 'xx'" in capsys.readouterr().err
    for bad in (["--task", "summarize"], ["--max-new-tokens", "0"], []):
        args = ["transcribe", str(wav), *bad]
        if bad:
            args += ["--model", str(WHISPER_DIR)]
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
