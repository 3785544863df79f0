"""Whisper's sizes (config.json) and decoding settings (generation_config.json).

Field names and defaults follow HF transformers' WhisperConfig (configuration_whisper.py) and the
generation_config.json of the released checkpoints, which HF's WhisperGenerationMixin reads
(lang_to_id, task_to_id, no_timestamps_token_id, suppress_tokens, begin_suppress_tokens,
max_initial_timestamp_index, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygpukit.models.config import _bad, _int, _is_int, _opt_bool, _opt_int
from pygpukit.models.errors import ModelLoadError, UnsupportedModelError

__all__ = [
    "WhisperConfig",
    "WhisperGenerationConfig",
    "DecoderCacheDims",
    "read_whisper_config",
    "read_generation_config",
]

# One encoder position per two mel frames (conv2 has stride 2); one timestamp token per 0.02 s.
INPUT_STRIDE = 2
TIME_PRECISION = 0.02
HOP_SECONDS = 0.01  # the mel hop: 160 samples at 16 kHz


@dataclass(frozen=True)
class DecoderCacheDims:
    """The decoder's self-attention cache sizes, in the names StaticKVCache reads."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_context: int


@dataclass(frozen=True)
class WhisperConfig:
    """One checkpoint's sizes (HF WhisperConfig names)."""

    vocab_size: int
    num_mel_bins: int
    d_model: int
    encoder_layers: int
    encoder_attention_heads: int
    decoder_layers: int
    decoder_attention_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_source_positions: int
    max_target_positions: int
    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5  # nn.LayerNorm's default, which every Whisper norm uses

    @property
    def encoder_head_dim(self) -> int:
        return self.d_model // self.encoder_attention_heads

    @property
    def decoder_head_dim(self) -> int:
        return self.d_model // self.decoder_attention_heads

    @property
    def num_frames(self) -> int:
        """Mel frames of one 30 s window: the encoder's input length."""
        return self.max_source_positions * INPUT_STRIDE

    @property
    def decoder_cache_dims(self) -> DecoderCacheDims:
        return DecoderCacheDims(
            self.decoder_layers,
            self.decoder_attention_heads,
            self.decoder_head_dim,
            self.max_target_positions,
        )


def whisper_config_from_dict(cfg: dict[str, Any], source: str = "config.json") -> WhisperConfig:
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{source}: expected a JSON object, got {type(cfg).__name__}")
    if cfg.get("model_type") != "whisper":
        raise UnsupportedModelError(
            f"{source}: model_type {cfg.get('model_type')!r} is not a Whisper model"
        )
    act = cfg.get("activation_function", "gelu")
    if act != "gelu":
        raise UnsupportedModelError(f"{source}: activation_function {act!r} (only gelu)")
    d = _int(cfg, "d_model", source=source)
    for key in ("encoder_attention_heads", "decoder_attention_heads"):
        h = _int(cfg, key, source=source)
        if d % h:
            raise _bad(source, key, f"a divisor of d_model ({d})", h)
    eos = cfg.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    if not isinstance(eos, int) or isinstance(eos, bool) or eos < 0:
        raise _bad(source, "eos_token_id", "a token id", eos)
    # scale_embedding multiplies nothing in HF's Whisper forward (embed_scale is computed but
    # never applied), so it is accepted and ignored, as HF does.
    _opt_bool(cfg, "scale_embedding", False, source)
    return WhisperConfig(
        vocab_size=_int(cfg, "vocab_size", source=source),
        num_mel_bins=_int(cfg, "num_mel_bins", source=source),
        d_model=d,
        encoder_layers=_int(cfg, "encoder_layers", source=source),
        encoder_attention_heads=_int(cfg, "encoder_attention_heads", source=source),
        decoder_layers=_int(cfg, "decoder_layers", source=source),
        decoder_attention_heads=_int(cfg, "decoder_attention_heads", source=source),
        encoder_ffn_dim=_int(cfg, "encoder_ffn_dim", source=source),
        decoder_ffn_dim=_int(cfg, "decoder_ffn_dim", source=source),
        max_source_positions=_int(cfg, "max_source_positions", source=source),
        max_target_positions=_int(cfg, "max_target_positions", source=source),
        decoder_start_token_id=_opt_int(cfg, "decoder_start_token_id", 50257, source, 0),
        eos_token_id=int(eos),
        pad_token_id=_opt_int(cfg, "pad_token_id", int(eos), source, 0),
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: not valid JSON ({exc})", file=str(path)) from None


def read_whisper_config(model_dir: str | Path) -> WhisperConfig:
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{path}: config.json is missing (a model directory needs one)")
    return whisper_config_from_dict(_read_json(path), str(path))


@dataclass
class WhisperGenerationConfig:
    """The decoding settings HF's Whisper generate reads from generation_config.json.

    suppress_tokens are masked at every step, begin_suppress_tokens at the first generated one;
    timestamps start at no_timestamps_token_id + 1, one per 0.02 s; the thresholds (None: off)
    drive the temperature fallback. Missing fields come from the tokenizer's special tokens
    (``from_tokens``) or HF's defaults.
    """

    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int
    no_timestamps_token_id: int | None = None
    prev_sot_token_id: int | None = None
    is_multilingual: bool = False
    lang_to_id: dict[str, int] = field(default_factory=dict)
    task_to_id: dict[str, int] = field(default_factory=dict)
    forced_decoder_ids: list[list[int | None]] | None = None
    suppress_tokens: list[int] = field(default_factory=list)
    begin_suppress_tokens: list[int] = field(default_factory=list)
    max_initial_timestamp_index: int | None = None
    max_length: int | None = None
    compression_ratio_threshold: float | None = None
    logprob_threshold: float | None = None

    @property
    def timestamp_begin(self) -> int | None:
        n = self.no_timestamps_token_id
        return None if n is None else n + 1


def _id_list(cfg: dict[str, Any], key: str, source: str) -> list[int]:
    v = cfg.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(_is_int(i) and i >= 0 for i in v):
        raise _bad(source, key, "a list of token ids", v)
    return [int(i) for i in v]


def _id_map(cfg: dict[str, Any], key: str, source: str) -> dict[str, int]:
    v = cfg.get(key) or {}
    if not isinstance(v, dict) or not all(_is_int(i) for i in v.values()):
        raise _bad(source, key, "an object of token ids", v)
    return {str(k): int(i) for k, i in v.items()}


def _opt_number(cfg: dict[str, Any], key: str, source: str) -> float | None:
    v = cfg.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(source, key, "a number", v)
    return float(v)


def generation_config_from_dict(
    cfg: dict[str, Any], config: WhisperConfig, source: str = "generation_config.json"
) -> WhisperGenerationConfig:
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{source}: expected a JSON object, got {type(cfg).__name__}")
    eos = cfg.get("eos_token_id", config.eos_token_id)
    if isinstance(eos, list):
        eos = eos[0] if eos else config.eos_token_id
    forced = cfg.get("forced_decoder_ids")
    if forced is not None and not (
        isinstance(forced, list)
        and all(isinstance(p, list) and len(p) == 2 and _is_int(p[0]) for p in forced)
    ):
        raise _bad(source, "forced_decoder_ids", "a list of [index, token id] pairs", forced)
    return WhisperGenerationConfig(
        decoder_start_token_id=_opt_int(
            cfg, "decoder_start_token_id", config.decoder_start_token_id, source, 0
        ),
        eos_token_id=int(eos),
        pad_token_id=_opt_int(cfg, "pad_token_id", config.pad_token_id, source, 0),
        no_timestamps_token_id=_opt_int(cfg, "no_timestamps_token_id", None, source, 0),
        prev_sot_token_id=_opt_int(cfg, "prev_sot_token_id", None, source, 0),
        is_multilingual=_opt_bool(cfg, "is_multilingual", bool(cfg.get("lang_to_id")), source),
        lang_to_id=_id_map(cfg, "lang_to_id", source),
        task_to_id=_id_map(cfg, "task_to_id", source),
        forced_decoder_ids=forced,
        suppress_tokens=_id_list(cfg, "suppress_tokens", source),
        begin_suppress_tokens=_id_list(cfg, "begin_suppress_tokens", source),
        max_initial_timestamp_index=_opt_int(cfg, "max_initial_timestamp_index", None, source, 0),
        max_length=_opt_int(cfg, "max_length", None, source),
        compression_ratio_threshold=_opt_number(cfg, "compression_ratio_threshold", source),
        logprob_threshold=_opt_number(cfg, "logprob_threshold", source),
    )


def from_tokens(config: WhisperConfig, tokenizer: Any) -> WhisperGenerationConfig:
    """Settings from the tokenizer's special tokens, for a directory without
    generation_config.json: the language tokens are the <|xx|> tokens between
    <|startoftranscript|> and <|translate|> (Whisper's vocabulary order)."""
    token_to_id = tokenizer.token_to_id
    sot = token_to_id("<|startoftranscript|>")
    translate = token_to_id("<|translate|>")
    langs: dict[str, int] = {}
    if sot is not None and translate is not None:
        for tid in range(sot + 1, translate):
            langs[str(tokenizer.backend.id_to_token(tid))] = tid
    tasks = {k: token_to_id(f"<|{k}|>") for k in ("transcribe", "translate")}
    return WhisperGenerationConfig(
        decoder_start_token_id=sot if sot is not None else config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        no_timestamps_token_id=token_to_id("<|notimestamps|>"),
        prev_sot_token_id=token_to_id("<|startofprev|>"),
        is_multilingual=bool(langs),
        lang_to_id=langs,
        task_to_id={k: v for k, v in tasks.items() if v is not None},
        begin_suppress_tokens=[config.eos_token_id],
    )


def read_generation_config(
    model_dir: str | Path, config: WhisperConfig, tokenizer: Any = None
) -> WhisperGenerationConfig:
    path = Path(model_dir) / "generation_config.json"
    if path.is_file():
        return generation_config_from_dict(_read_json(path), config, str(path))
    if tokenizer is None:
        return WhisperGenerationConfig(
            config.decoder_start_token_id, config.eos_token_id, config.pad_token_id
        )
    return from_tokens(config, tokenizer)
