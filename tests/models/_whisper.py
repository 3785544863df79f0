"""Shared pieces of the Whisper tests: the tiny checkpoint, its goldens and input audio (the
signals tests/fixtures/hf/make_whisper_goldens.py fed HF)."""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from typing import Any

import numpy as np

from ._util import FIXTURES

WHISPER_DIR = FIXTURES / "whisper_tiny"


@cache
def _maker() -> Any:
    path = FIXTURES / "make_whisper_goldens.py"
    spec = importlib.util.spec_from_file_location("make_whisper_goldens", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def whisper_golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WHISPER_DIR / "golden.json").read_text())
    return data


def case_audio(name: str, case: dict[str, Any]) -> np.ndarray:
    m = _maker()
    out: np.ndarray = m.long_audio() if name == "long_form_en" else m.read_wav(case["audio"])
    return out
