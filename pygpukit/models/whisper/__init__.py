"""Whisper speech recognition on the engine: the encoder-decoder built from pygpukit ops
(model.py), HF checkpoints (config.json, safetensors, tokenizer.json, generation_config.json),
and HF's decoding (decode.py: prompt, greedy with temperature fallback, timestamp rules,
long-form windows). ``python -m pygpukit transcribe FILE --model DIR`` is the command line."""

from __future__ import annotations

from pygpukit.models.whisper.config import (
    WhisperConfig,
    WhisperGenerationConfig,
    read_generation_config,
    read_whisper_config,
)
from pygpukit.models.whisper.decode import (
    Segment,
    Transcription,
    compression_ratio,
    decode_window,
    detect_language,
    prompt_tokens,
    transcribe,
)
from pygpukit.models.whisper.loader import load_whisper, whisper_from_source
from pygpukit.models.whisper.logits import LogitRules
from pygpukit.models.whisper.model import DecoderState, WhisperModel

__all__ = [
    "DecoderState",
    "LogitRules",
    "Segment",
    "Transcription",
    "WhisperConfig",
    "WhisperGenerationConfig",
    "WhisperModel",
    "compression_ratio",
    "decode_window",
    "detect_language",
    "load_whisper",
    "prompt_tokens",
    "read_generation_config",
    "read_whisper_config",
    "transcribe",
    "whisper_from_source",
]
