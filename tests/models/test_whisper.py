"""Whisper on the engine against HF transformers (tiny random-weight checkpoint, float32, CPU).

The goldens are HF generate's outputs for espeak-ng speech (tests/fixtures/hf/
make_whisper_goldens.py): the prompt and greedy tokens of each window, the returned sequence,
and the segments (start, end, tokens) for short-form audio with and without timestamps,
language detection, translation and long-form audio (sequential windows seeking by the last
timestamp). A live comparison runs when torch and transformers are importable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models.errors import ModelLoadError, UnsupportedModelError
from pygpukit.models.whisper import (
    LogitRules,
    compression_ratio,
    decode_window,
    load_whisper,
    prompt_tokens,
    transcribe,
)
from pygpukit.models.whisper.config import whisper_config_from_dict
from pygpukit.models.whisper.logits import timestamp_ranges

from ._util import hf_available
from ._whisper import WHISPER_DIR, case_audio, whisper_golden

GOLDEN = whisper_golden()
CASES = sorted(GOLDEN["cases"])


@pytest.fixture(scope="module")
def model() -> Any:
    return load_whisper(WHISPER_DIR, dtype="float32", device="cpu")


def _run(model: Any, name: str, **kw: Any) -> Any:
    c = GOLDEN["cases"][name]
    return transcribe(
        model,
        case_audio(name, c),
        language=c.get("language"),
        task=c.get("task"),
        timestamps=c["return_timestamps"],
        max_new_tokens=GOLDEN["max_new_tokens"],
        **kw,
    )


def _check(r: Any, c: dict[str, Any]) -> None:
    if "tokens" in c:  # short-form: the first window's prompt and greedy tokens
        assert r.windows[0] == c["tokens"]
    assert r.tokens == c["sequence"]
    got = [(s.start, s.end, s.tokens) for s in r.segments]
    want = [(s["start"], s["end"], s["tokens"]) for s in c["segments"]]
    assert [g[2] for g in got] == [w[2] for w in want]
    np.testing.assert_allclose([g[:2] for g in got], [w[:2] for w in want], rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", CASES)
def test_matches_hf_golden(model: Any, name: str) -> None:
    _check(_run(model, name), GOLDEN["cases"][name])


def test_prompts_follow_hf(model: Any) -> None:
    g = GOLDEN["cases"]
    assert prompt_tokens(model, "en", "transcribe", False) == g["transcribe_en"]["tokens"][:4]
    assert prompt_tokens(model, "en", None, True) == g["timestamps_en"]["tokens"][:3]
    assert prompt_tokens(model, "de", "translate", False) == g["translate_de"]["tokens"][:4]
    detected = g["detect_language"]["tokens"][1]
    assert prompt_tokens(model, None, None, False, detected) == g["detect_language"]["tokens"][:3]
    r = _run(model, "detect_language")
    assert r.language == "en"


def test_features_input_equals_audio_input(model: Any) -> None:
    from pygpukit.models.whisper.decode import log_mel

    c = GOLDEN["cases"]["transcribe_en"]
    audio = case_audio("transcribe_en", c)
    feats = log_mel(model, audio)
    r = transcribe(model, feats, language="en", max_new_tokens=8)
    assert r.windows[0] == c["tokens"][:12]


def test_wav_path_input(model: Any, tmp_path: Any) -> None:
    sf = pytest.importorskip("soundfile")
    c = GOLDEN["cases"]["transcribe_en"]
    path = tmp_path / "speech.wav"
    sf.write(path, case_audio("transcribe_en", c), 16000, subtype="FLOAT")
    r = transcribe(model, path, language="en", max_new_tokens=8)
    assert r.windows[0] == c["tokens"][:12]
    assert isinstance(r.text, str) and r.segments


def test_temperature_fallback_keeps_greedy_when_thresholds_pass(model: Any) -> None:
    c = GOLDEN["cases"]["transcribe_en"]
    r = _run(model, "transcribe_en", temperature=(0.0, 0.5), compression_ratio_threshold=1e9)
    _check(r, c)


def test_temperature_fallback_moves_on_when_a_threshold_fails(model: Any) -> None:
    # The greedy output repeats itself (compression ratio well above 1): a threshold of 1.0
    # sends the window to the next temperature, whose sample differs from the greedy tokens.
    c = GOLDEN["cases"]["transcribe_en"]
    r = _run(model, "transcribe_en", temperature=(0.0, 1.0), compression_ratio_threshold=1.0)
    assert r.windows[0][:4] == c["tokens"][:4]
    assert r.windows[0] != c["tokens"]


def test_greedy_step_logprobs(model: Any) -> None:
    """decode_window's mean log-probability equals log_softmax of the processed logits at the
    chosen tokens, recomputed on the host step by step."""
    c = GOLDEN["cases"]["transcribe_en"]
    from pygpukit.models.whisper.decode import log_mel

    state = model.new_state(1)
    model.set_encoder_output(state, model.encode(log_mel(model, case_audio("transcribe_en", c))))
    gen = model.generation
    rules = LogitRules(gen, model.config.vocab_size, 1, model.device, False)
    prompt = c["tokens"][:4]
    w = decode_window(model, state, prompt, rules, 6)
    assert prompt + w.tokens[0] == c["tokens"][:10]
    state2 = model.new_state(1)
    model.set_encoder_output(state2, model.encode(log_mel(model, case_audio("transcribe_en", c))))
    seq, total = list(prompt), 0.0
    for i, tok in enumerate(w.tokens[0]):
        logits = model.forward(state2, [seq] if i == 0 else [[seq[-1]]]).to_numpy()[0]
        logits = logits.astype(np.float64)
        logits[gen.suppress_tokens] = -np.inf
        if i == 0:
            logits[gen.begin_suppress_tokens] = -np.inf
        m = logits.max()
        total += logits[tok] - m - np.log(np.exp(logits - m).sum())
        seq.append(tok)
    assert w.avg_logprob[0] == pytest.approx(total / len(w.tokens[0]), abs=1e-5)


def test_compression_ratio_is_hf_formula() -> None:
    import zlib

    toks = [5, 5, 5, 5, 300, 1200, 5, 5]
    raw = b"".join(t.to_bytes(2, "little") for t in toks)  # vocab 1769: 2 bytes an id
    assert compression_ratio(toks, 1769) == len(raw) / len(zlib.compress(raw))
    assert compression_ratio([7] * 200, 51866) > 2.4


def test_timestamp_rules_ranges() -> None:
    tb, eos, v = 100, 50, 200
    # first step: only timestamps up to max_initial
    assert timestamp_ranges([], tb, eos, v, 5) == [(0, tb), (tb + 6, v)]
    # after text then one timestamp: a timestamp (not earlier) or eos must follow
    assert timestamp_ranges([1, 2, 110], tb, eos, v, None) == [(0, eos), (tb, 110)]
    # after a pair: text must follow; no timestamp at or before the last one
    assert timestamp_ranges([105, 3, 110, 110], tb, eos, v, None) == [(tb, v), (tb, 111)]
    # text after text: timestamps must not go back
    assert timestamp_ranges([105, 3, 4], tb, eos, v, None) == [(tb, 106)]


def test_timestamp_rules_on_device_match_host(model: Any) -> None:
    """LogitRules.apply == the rules of WhisperTimeStampLogitsProcessor in NumPy."""
    gen = model.generation
    v, tb = model.config.vocab_size, gen.timestamp_begin
    rules = LogitRules(gen, v, 2, model.device, True)
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((2, v)).astype(np.float32) * 3
    logits[0, tb:] -= 8.0  # row 0: some text token likelier than all timestamps together
    logits[1, tb:] += 4.0  # row 1: the timestamps together likelier than any text token
    seqs = [[tb + 5, 30, 40], [tb + 5, 30]]
    rules.set_tokens(seqs)
    got = rules.apply(gp.from_numpy(logits, device="cpu"), first=False).to_numpy()
    for r, seq in enumerate(seqs):
        want = logits[r].astype(np.float64)
        want[[*gen.suppress_tokens, gen.no_timestamps_token_id]] = -np.inf
        for lo, hi in timestamp_ranges(seq, tb, gen.eos_token_id, v, 50):
            want[lo:hi] = -np.inf
        lp = want - np.logaddexp.reduce(want)
        if np.logaddexp.reduce(lp[tb:]) > lp[:tb].max():
            want[:tb] = -np.inf
        np.testing.assert_array_equal(np.isinf(got[r]), np.isinf(want))
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[r][fin], want[fin], rtol=0, atol=1e-6)
    assert np.isinf(got[1, :tb]).all() and not np.isinf(got[0, :tb]).all()


# ----- bad input ---------------------------------------------------------------------------
def test_bad_inputs(model: Any) -> None:
    with pytest.raises(ValueError, match=r"language 'xx'"):
        transcribe(model, np.zeros(16000, np.float32), language="xx")
    with pytest.raises(ValueError, match=r"task must be one of"):
        transcribe(model, np.zeros(16000, np.float32), language="en", task="summarize")
    with pytest.raises(ValueError, match=r"mono"):
        transcribe(model, np.zeros((1, 2, 16000), np.float32))
    with pytest.raises(ValueError, match=r"features must be \[80, frames\]"):
        transcribe(model, np.zeros((40, 3000), np.float32))
    with pytest.raises(FileNotFoundError, match=r"missing.wav"):
        transcribe(model, "missing.wav")
    with pytest.raises(ValueError, match=r"30 s window"):
        model.encode(gp.zeros((1, 80, 100), "float32", "cpu"))
    with pytest.raises(ValueError, match=r"temperature"):
        transcribe(model, np.zeros(16000, np.float32), language="en", temperature=())


def test_bad_model_dirs(tmp_path: Any) -> None:
    with pytest.raises(ModelLoadError, match=r"no such file"):
        load_whisper(tmp_path / "absent")
    with pytest.raises(ModelLoadError, match=r"config.json is missing"):
        load_whisper(tmp_path)
    cfg = (WHISPER_DIR / "config.json").read_text()
    (tmp_path / "config.json").write_text(cfg.replace('"whisper"', '"llama"'))
    with pytest.raises(UnsupportedModelError, match=r"not a Whisper model"):
        load_whisper(tmp_path)
    (tmp_path / "config.json").write_text(cfg.replace('"d_model": 64', '"d_model": 66'))
    with pytest.raises(ModelLoadError, match=r"decoder_attention_heads|encoder_attention_heads"):
        load_whisper(tmp_path)
    (tmp_path / "config.json").write_text(cfg)
    with pytest.raises(ModelLoadError):  # no weights
        load_whisper(tmp_path)
    with pytest.raises(ModelLoadError, match=r"missing field 'd_model'"):
        whisper_config_from_dict({"model_type": "whisper", "vocab_size": 5})


def test_english_only_model_refuses_language(model: Any) -> None:
    import dataclasses

    en = dataclasses.replace(model.generation, is_multilingual=False, lang_to_id={})
    saved = model.generation
    model.generation = en
    try:
        with pytest.raises(ValueError, match=r"English-only"):
            prompt_tokens(model, "en", None, False)
        assert prompt_tokens(model, None, None, False) == [en.decoder_start_token_id, 267]
    finally:
        model.generation = saved


# ----- live HF ------------------------------------------------------------------------------
@pytest.mark.skipif(not hf_available(), reason="torch and transformers are not installed")
def test_live_hf_parity(model: Any) -> None:
    import torch
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    ref = WhisperForConditionalGeneration.from_pretrained(WHISPER_DIR, dtype=torch.float32)
    fe = WhisperFeatureExtractor(feature_size=80)
    c = GOLDEN["cases"]["timestamps_en"]
    audio = case_audio("timestamps_en", c)
    feats = fe(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        out = ref.eval().generate(
            feats, language="en", return_timestamps=True, max_new_tokens=24, return_segments=True
        )
    r = transcribe(model, audio, language="en", timestamps=True, max_new_tokens=24)
    assert r.tokens == out["sequences"][0].tolist()
