"""Whisper on CUDA (marker ``gpu``): half precision against the float32 HF goldens where the
margins decide the tokens, and the CUDA-graph decoder step against the eager one."""

from __future__ import annotations

from typing import Any

import pytest

from pygpukit.models.whisper import LogitRules, decode_window, load_whisper, transcribe
from pygpukit.models.whisper.decode import log_mel

from ._whisper import WHISPER_DIR, case_audio, whisper_golden

pytestmark = pytest.mark.gpu
GOLDEN = whisper_golden()
# Top-1 minus top-2 logit margins above which half precision must pick HF's token.
MARGIN = {"float16": 0.05, "bfloat16": 0.3}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["transcribe_en", "translate_de", "detect_language"])
def test_cuda_tokens_match_golden(dtype: str, name: str) -> None:
    c = GOLDEN["cases"][name]
    model = load_whisper(WHISPER_DIR, dtype=dtype, device="cuda")
    r = transcribe(
        model,
        case_audio(name, c),
        language=c.get("language"),
        task=c.get("task"),
        max_new_tokens=GOLDEN["max_new_tokens"],
    )
    begin = 4 if "language" in c else 3
    got, want = r.windows[0], c["tokens"]
    assert got[:begin] == want[:begin]
    if dtype == "float32":
        assert got == want
        return
    # Compare up to the first step the margins leave open.
    n = next((i for i, m in enumerate(c["margins"]) if m < MARGIN[dtype]), len(c["margins"]))
    assert got[begin : begin + n] == want[begin : begin + n], f"first open step {n}"


@pytest.mark.parametrize("timestamps", [False, True])
def test_graph_step_equals_eager_bitwise(timestamps: bool) -> None:
    from pygpukit.models.whisper.graph import WhisperStepGraph

    c = GOLDEN["cases"]["timestamps_en"]
    model = load_whisper(WHISPER_DIR, dtype="float16", device="cuda")
    feats = log_mel(model, case_audio("timestamps_en", c))
    results = []
    for use_graph in (False, True):
        state = model.new_state(1)
        model.set_encoder_output(state, model.encode(feats))
        rules = LogitRules(model.generation, model.config.vocab_size, 1, model.device, timestamps)
        graph: Any = WhisperStepGraph(model, state, rules) if use_graph else None
        prompt = [257, 258, 263] + ([] if timestamps else [267])
        results.append(decode_window(model, state, prompt, rules, 40, graph=graph))
    assert results[0].tokens == results[1].tokens
    assert results[0].avg_logprob == results[1].avg_logprob


def test_transcribe_graph_equals_eager() -> None:
    c = GOLDEN["cases"]["long_form_en"]
    model = load_whisper(WHISPER_DIR, dtype="float16", device="cuda")
    audio = case_audio("long_form_en", c)
    a = transcribe(model, audio, language="en", max_new_tokens=48)
    b = transcribe(model, audio, language="en", max_new_tokens=48, graph=True)
    assert a.tokens == b.tokens and a.windows == b.windows
