"""Transcription: the decoder prompt, greedy decoding with the temperature fallback, and
long-form audio by sequential 30 s windows, as HF's WhisperGenerationMixin.generate does it
(transformers/models/whisper/generation_whisper.py).

- Prompt (_retrieve_init_tokens): <|startoftranscript|>, the language (given, or detected from
  the first window: one decoder step on <|startoftranscript|>, argmax over the language
  tokens), the task (given; transcribe when only the language is given; else the checkpoint's
  forced_decoder_ids), and <|notimestamps|> unless timestamps are wanted.
- Window loop: seek starts at frame 0; each step encodes the next 3000 frames (the last one
  zero-padded in feature space, as HF pads), decodes, splits the tokens into segments at
  consecutive timestamp tokens (_retrieve_segment) and advances seek to the last complete
  segment's end timestamp (or by the whole window when the output ends in a single timestamp
  or has no pair). Audio of more than 3000 frames turns timestamps on (HF requires them).
- Fallback (generate_with_fallback): at each temperature in turn, decode; the window needs the
  next temperature when the zlib compression ratio of its tokens exceeds
  compression_ratio_threshold or their mean log-probability is below logprob_threshold.
  Sampling at temperature > 0 uses the temperature alone (gp.sample; HF's default top_k=50
  is not applied) with its own seed.
Left out: conditioning on previous windows' text (condition_on_prev_tokens), prompt_ids,
no-speech detection, beam search and word-level timestamps.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy, zeros
from pygpukit.dtypes import int64
from pygpukit.models.whisper.config import HOP_SECONDS, INPUT_STRIDE, TIME_PRECISION
from pygpukit.models.whisper.logits import LogitRules, choose
from pygpukit.models.whisper.model import DecoderState, WhisperModel

__all__ = [
    "Segment",
    "Transcription",
    "transcribe",
    "prompt_tokens",
    "detect_language",
    "decode_window",
    "compression_ratio",
    "log_mel",
]

SAMPLE_RATE = 16000


@dataclass
class Segment:
    start: float  # seconds
    end: float
    text: str
    tokens: list[int]


@dataclass
class Transcription:
    """text: the decoded tokens (timestamps and special tokens dropped); tokens: HF generate's
    ``sequences`` (the segments' tokens one after another); segments: (start, end, text)."""

    text: str
    segments: list[Segment]
    tokens: list[int]
    language: str | None
    prompt: list[int]
    windows: list[list[int]] = field(default_factory=list)  # each window's prompt + output


def compression_ratio(tokens: Sequence[int], vocab_size: int) -> float:
    """HF _retrieve_compression_ratio: token bytes (little-endian, the fewest whole bytes that
    hold an id) over their zlib-compressed length."""
    width = int(math.log2(vocab_size) / 8) + 1
    raw = b"".join(int(t).to_bytes(width, "little") for t in tokens)
    return len(raw) / len(zlib.compress(raw))


def log_mel(model: WhisperModel, audio: Any) -> GPUArray:
    """Whisper features of 16 kHz audio [samples]: [num_mel_bins, frames], padded to a 30 s
    window when shorter (HF's default), the whole length otherwise (padding='longest')."""
    from pygpukit.audio.whisper_features import log_mel_spectrogram

    if not isinstance(audio, GPUArray):
        audio = from_numpy(np.ascontiguousarray(audio, dtype=np.float32), device=model.device)
    if audio.ndim != 1:
        raise ValueError(f"transcribe: audio must be mono [samples], got shape {audio.shape}")
    window = model.config.num_frames * 160  # samples of one window (hop 160)
    chunk = 30 if audio.shape[0] <= window else None
    return log_mel_spectrogram(audio, model.config.num_mel_bins, chunk_length=chunk)


def _language_id(model: WhisperModel, language: str) -> int:
    gen = model.generation
    key = language if language.startswith("<|") else f"<|{language.lower()}|>"
    if key not in gen.lang_to_id:
        known = ", ".join(sorted(k.strip("<|>") for k in gen.lang_to_id)) or "none"
        raise ValueError(f"language {language!r} is not one of this model's ({known})")
    return gen.lang_to_id[key]


def detect_language(model: WhisperModel, state: DecoderState) -> list[int]:
    """HF detect_language: one decoder step on <|startoftranscript|> over the state's encoder
    output; the likeliest language token of each row."""
    from pygpukit import ops

    gen = model.generation
    bias = np.full(model.config.vocab_size, -np.inf, np.float32)
    bias[list(gen.lang_to_id.values())] = 0.0
    logits = model.forward(state, [[gen.decoder_start_token_id]] * state.batch_size)
    pick = ops.argmax(ops.add(logits, from_numpy(bias, device=model.device)), axis=-1)
    state.reset()
    return [int(t) for t in pick.to_numpy()]


def prompt_tokens(
    model: WhisperModel,
    language: str | None,
    task: str | None,
    timestamps: bool,
    detected: int | None = None,
) -> list[int]:
    """The decoder prompt (HF _retrieve_init_tokens) for one row; ``detected`` is the language
    token to use when none is given (multilingual models)."""
    gen = model.generation
    init: list[int | None] = [gen.decoder_start_token_id]
    if not gen.is_multilingual and (language is not None or task is not None):
        raise ValueError("this model is English-only: language and task cannot be set")
    if language is None and task is None and gen.forced_decoder_ids:
        for i, (pos, tid) in enumerate(sorted(gen.forced_decoder_ids, key=lambda p: p[0] or 0)):
            if pos != i + 1:
                break
            init.append(tid)
    lang = _language_id(model, language) if language is not None else None
    if lang is None and gen.lang_to_id and (len(init) <= 1 or init[1] is None):
        lang = detected
    if lang is not None:
        if len(init) > 1:
            init[1] = lang
        else:
            init.append(lang)
    tasks = gen.task_to_id
    if task is not None:
        if task not in tasks:
            raise ValueError(f"task must be one of {sorted(tasks)}, got {task!r}")
        present = [i for i, t in enumerate(init) if t in tasks.values()]
        if present:
            init[present[0]] = tasks[task]
        else:
            init.append(tasks[task])
    elif language is not None and "transcribe" in tasks:
        if not any(t in tasks.values() for t in init):
            init.append(tasks["transcribe"])
    nots = gen.no_timestamps_token_id
    if not timestamps and nots is not None and init[-1] != nots:
        init.append(nots)
    elif timestamps and init[-1] == nots:
        init.pop()
    return [t for t in init if t is not None]


@dataclass
class WindowOutput:
    tokens: list[list[int]]  # per row, the generated tokens up to and including end-of-text
    avg_logprob: list[float]


def decode_window(
    model: WhisperModel,
    state: DecoderState,
    prompt: Sequence[int],
    rules: LogitRules,
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    stop_at_eos: bool = True,
    graph: Any = None,
) -> WindowOutput:
    """Decode every row of ``state`` (its encoder output set) after ``prompt``. Each step reads
    back only the chosen tokens; the log-probabilities stay on the device until the end.
    stop_at_eos=False keeps going to max_new_tokens (benchmarks). ``graph``: a
    WhisperStepGraph of this state and rules, replayed for the single-token steps."""
    b, eos = state.batch_size, model.generation.eos_token_id
    state.reset()
    logits = model.forward(state, [list(prompt)] * b)
    out: list[list[int]] = [[] for _ in range(b)]
    done = [False] * b
    lps: list[GPUArray] = []
    counter = zeros((b,), int64, model.device)
    rules.set_tokens(out)
    tok, lp = choose(rules.apply(logits, first=True), temperature, counter, seed)
    for i in range(max_new_tokens):
        lps.append(lp)
        host = tok.to_numpy()  # the one read of a step
        for r in range(b):
            if not done[r]:
                out[r].append(int(host[r]))
                done[r] = stop_at_eos and int(host[r]) == eos
        if all(done) or i == max_new_tokens - 1:
            break
        rules.set_tokens(out)
        if graph is not None and temperature <= 0:
            tok, lp = graph.step(tok)
            lp = lp.copy()  # the graph's output is rewritten by the next replay
        else:
            logits = model.forward(state, tok.reshape(b, 1))
            tok, lp = choose(rules.apply(logits, first=False), temperature, counter, seed)
    all_lp = np.stack([a.to_numpy() for a in lps]) if lps else np.zeros((0, b), np.float32)
    avg = [float(all_lp[: len(t), r].sum() / max(len(t), 1)) for r, t in enumerate(out)]
    return WindowOutput(out, avg)


def _segments(
    seq: list[int], tb: int, time_offset: float, seek_frames: int
) -> tuple[list[tuple[float, float, list[int]]], int]:
    """HF _retrieve_segment: (start, end, tokens) of each segment and the frames to seek."""
    is_ts = [t >= tb for t in seq]
    single_ending = is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(seq) - 1) if is_ts[i] and is_ts[i + 1]]
    segs: list[tuple[float, float, list[int]]] = []
    if cuts:
        if single_ending:
            cuts.append(len(seq))
        else:
            cuts[-1] += 1  # keep the closing timestamp in the last segment
        last = 0
        for k, cur in enumerate(cuts):
            part = seq[last:cur]
            end_at = -1 if k < len(cuts) - 1 or single_ending else -2
            start = time_offset + (part[0] - tb) * TIME_PRECISION
            segs.append((start, time_offset + (part[end_at] - tb) * TIME_PRECISION, part))
            last = cur
        if single_ending:
            return segs, seek_frames
        return segs, (seq[last - 2] - tb) * INPUT_STRIDE
    stamps = [t for t in seq if t >= tb]
    last_pos = float(int(seek_frames * HOP_SECONDS / TIME_PRECISION))
    if stamps and stamps[-1] != tb:
        last_pos = float(stamps[-1] - tb)
    return [(time_offset, time_offset + last_pos * TIME_PRECISION, seq)], seek_frames


def _needs_fallback(
    model: WhisperModel, w: WindowOutput, cr_max: float | None, lp_min: float | None
) -> bool:
    toks = w.tokens[0]
    if cr_max is not None and compression_ratio(toks, model.config.vocab_size) > cr_max:
        return True
    return lp_min is not None and w.avg_logprob[0] < lp_min


def transcribe(
    model: WhisperModel,
    audio: Any,
    *,
    language: str | None = None,
    task: str | None = None,
    timestamps: bool = False,
    temperature: float | Sequence[float] = 0.0,
    compression_ratio_threshold: float | None = None,
    logprob_threshold: float | None = None,
    max_new_tokens: int | None = None,
    seed: int = 0,
    graph: bool = False,
) -> Transcription:
    """Transcribe (or translate, task='translate') 16 kHz mono audio: a path (read with
    pygpukit.audio.load and resampled to 16 kHz), samples [n] (NumPy or GPUArray), or
    log-mel features [num_mel_bins, frames]. temperature: one value or the fallback ladder,
    e.g. (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) with compression_ratio_threshold=2.4 and
    logprob_threshold=-1.0 (HF's recommended settings; the thresholds default to those of
    generation_config.json). graph=True replays the greedy decoder step from a CUDA graph."""
    feats = _features(model, audio)
    c, gen = model.config, model.generation
    frames = int(feats.shape[-1])
    long_form = frames > c.num_frames
    timestamps = timestamps or long_form
    temps = [float(temperature)] if isinstance(temperature, (int, float)) else list(temperature)
    if not temps:
        raise ValueError("temperature: give a number or a non-empty sequence")
    cr_max = compression_ratio_threshold or gen.compression_ratio_threshold
    lp_min = logprob_threshold if logprob_threshold is not None else gen.logprob_threshold
    tb = gen.timestamp_begin if gen.timestamp_begin is not None else c.vocab_size + 1
    state = model.new_state(1)
    rules = LogitRules(gen, c.vocab_size, 1, model.device, timestamps)
    step_graph = None
    if graph:
        from pygpukit.models.whisper.graph import WhisperStepGraph

        step_graph = WhisperStepGraph(model, state, rules)
    prompt: list[int] | None = None
    lang_name: str | None = language
    seek, pieces, windows = 0, [], []
    while seek < frames:
        n = min(frames - seek, c.num_frames)
        window = zeros((c.num_mel_bins, c.num_frames), feats.dtype, feats.device)
        window[:, :n] = feats[:, seek : seek + n]
        model.set_encoder_output(state, model.encode(window))
        if prompt is None:
            detected = None
            if language is None and gen.is_multilingual and gen.lang_to_id:
                detected = detect_language(model, state)[0]
                lang_name = _lang_name(model, detected)
            prompt = prompt_tokens(model, language, task, timestamps, detected)
        limit = c.max_target_positions - len(prompt)
        cap = min((gen.max_length or c.max_target_positions) + len(prompt), c.max_target_positions)
        new = min(max_new_tokens, limit) if max_new_tokens is not None else cap - len(prompt)
        for k, temp in enumerate(temps):
            w = decode_window(model, state, prompt, rules, new, temp, seed + k, True, step_graph)
            if k == len(temps) - 1 or not _needs_fallback(model, w, cr_max, lp_min):
                break
        seq = w.tokens[0]
        windows.append(list(prompt) + seq)
        if seq and seq[-1] == gen.eos_token_id:
            seq = seq[:-1]
        time_offset = seek * TIME_PRECISION / INPUT_STRIDE
        segs, advance = _segments(seq, tb, time_offset, n)
        pieces.extend(segs)
        # A window whose only timestamps are <|0.00|> would not move seek (HF loops there);
        # at least one frame forward keeps long-form decoding finite.
        seek += max(advance, 1)
    tok = model.tokenizer
    segments = [Segment(s, e, _text(tok, t, tb), t) for s, e, t in pieces]
    tokens = [t for _, _, part in pieces for t in part]
    return Transcription(_text(tok, tokens, tb), segments, tokens, lang_name, prompt or [], windows)


def _lang_name(model: WhisperModel, token_id: int) -> str | None:
    for name, tid in model.generation.lang_to_id.items():
        if tid == token_id:
            return name.strip("<|>")
    return None


def _text(tokenizer: Any, tokens: Sequence[int], tb: int) -> str:
    if tokenizer is None:
        return ""
    return str(tokenizer.decode([t for t in tokens if t < tb], skip_special_tokens=True))


def _features(model: WhisperModel, audio: Any) -> GPUArray:
    c = model.config
    if isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__"):
        from pathlib import Path

        from pygpukit.audio.io import load

        path = Path(audio if not isinstance(audio, bytes) else audio.decode())
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such audio file")
        audio, _ = load(path, sr=SAMPLE_RATE, device=model.device)
    if getattr(audio, "ndim", 1) == 2:  # log-mel features [num_mel_bins, frames]
        feats = (
            audio
            if isinstance(audio, GPUArray)
            else from_numpy(np.asarray(audio, np.float32), device=model.device)
        )
        if feats.shape[0] != c.num_mel_bins:
            raise ValueError(
                f"transcribe: features must be [{c.num_mel_bins}, frames], got shape {feats.shape}"
            )
        return feats
    feats = log_mel(model, audio)
    if feats.shape[-1] < 1:
        raise ValueError("transcribe: the audio is empty")
    return feats
