"""Whisper on CUDA (marker ``gpu``): half precision against the float32 HF goldens where the
margins decide the tokens, and the CUDA-graph decoder step against the eager one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pygpukit.models.whisper import LogitRules, decode_window, load_whisper, transcribe
from pygpukit.models.whisper.decode import log_mel

from ._util import hf_available
from ._whisper import WHISPER_DIR, _maker, case_audio, whisper_golden

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


@pytest.mark.skipif(not hf_available(), reason="torch and transformers are not installed")
@pytest.mark.parametrize("shape", ["tiny", "base"])
def test_live_hf_shapes_half_tokens(shape: str, tmp_path: Any) -> None:
    """Whisper tiny and base shapes (d_model 384 / 512, 4 / 6 layers each side, 6 / 8 heads;
    the fixture's byte-level tokenizer), random weights made by HF, run in float16 here against
    HF's float32 greedy tokens on the same weights (the English transcription of the speech
    fixture). Teacher-forced on HF's tokens, every step whose top-1 minus top-2 margin is at
    least 0.05 picks HF's token (at least 12 such steps); decoding freely, the tokens equal HF's
    up to the first step under that margin."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
    )

    m = _maker()
    ids = m.build_tokenizer(tmp_path)
    dims = {"tiny": (384, 4, 6), "base": (512, 6, 8)}[shape]
    cfg = m.tiny_config(ids) | {
        "d_model": dims[0], "encoder_layers": dims[1], "decoder_layers": dims[1],
        "encoder_attention_heads": dims[2], "decoder_attention_heads": dims[2],
        "encoder_ffn_dim": 4 * dims[0], "decoder_ffn_dim": 4 * dims[0], "init_std": 0.05,
    }  # fmt: skip
    torch.manual_seed(3)
    hf = WhisperForConditionalGeneration(WhisperConfig(**cfg)).eval()
    gen = m.generation_config(ids)
    hf.generation_config = GenerationConfig(**gen)
    with torch.no_grad():
        for p in hf.parameters():  # float16 values, so both sides hold the same weights
            p.copy_(p.to(torch.float16).to(torch.float32))
    hf.to(torch.float16).save_pretrained(tmp_path)
    hf = hf.to(torch.float32)  # the reference on the host, as the goldens are made
    audio = m.read_wav("speech_hello_16k.wav")
    feats = m.features(WhisperFeatureExtractor(feature_size=80), audio, long=False)
    kw = {"language": "en", "task": "transcribe", "return_timestamps": False}
    with torch.no_grad():
        out = hf.generate(feats, max_new_tokens=32, return_segments=True, **kw)
    raw = out["segments"][0][0]["result"]
    want = (raw if isinstance(raw, torch.Tensor) else raw["sequences"]).tolist()
    margins = m.margins(hf, feats, want, 4, gen, torch)
    model = load_whisper(tmp_path, dtype="float16", device="cuda")
    got = transcribe(model, audio, language="en", max_new_tokens=32).windows[0]
    n = next((i for i, v in enumerate(margins) if v < MARGIN["float16"]), len(margins))
    assert got[:4] == want[:4]
    assert got[4 : 4 + n] == want[4 : 4 + n], f"first open step {n}"
    state = model.new_state(1)
    model.set_encoder_output(state, model.encode(log_mel(model, audio)))
    decided = []
    for i, margin in enumerate(margins):
        ids_in = [want[: 4 + i]] if i == 0 else [[want[3 + i]]]
        logits = model.forward(state, ids_in).astype("float32").to_numpy()[0]
        logits[gen["suppress_tokens"]] = -np.inf
        if i == 0:
            logits[gen["begin_suppress_tokens"]] = -np.inf
        if margin >= MARGIN["float16"]:
            decided.append((i, int(np.argmax(logits)), want[4 + i]))
    assert all(a == b for _, a, b in decided), decided
    assert len(decided) >= 12, f"margins {margins}: the weights decide too few steps"
