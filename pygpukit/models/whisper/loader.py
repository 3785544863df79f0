"""Loading a Whisper model directory: config.json, model.safetensors (or an index),
tokenizer.json and generation_config.json (HF layout, as save_pretrained writes them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pygpukit import runtime
from pygpukit.models.errors import ModelLoadError
from pygpukit.models.loader import _progress, resolve_dtype
from pygpukit.models.safetensors_io import load_safetensors
from pygpukit.models.tokenizer import Tokenizer
from pygpukit.models.weights import TensorSource, total_bytes
from pygpukit.models.whisper.config import (
    WhisperConfig,
    WhisperGenerationConfig,
    read_generation_config,
    read_whisper_config,
)
from pygpukit.models.whisper.model import WhisperModel
from pygpukit.models.whisper.weights import load as load_weights

__all__ = ["load_whisper", "whisper_from_source"]


def whisper_from_source(
    source: TensorSource,
    config: WhisperConfig,
    generation: WhisperGenerationConfig,
    dtype: Any = None,
    device: Any = None,
    tokenizer: Tokenizer | None = None,
    where: str = "checkpoint",
    progress: bool | None = None,
) -> WhisperModel:
    """A model from any tensor source in HF naming (a safetensors file, a state dict wrapper)."""
    dev = runtime.device(device) if device is not None else runtime.default_device()
    dt = resolve_dtype(dtype, dev)
    bar = _progress(total_bytes(source), f"loading {Path(where).name}", progress)
    try:
        w = load_weights(source, config, dt, dev, bar.update if bar else None, where)
    finally:
        if bar is not None:
            bar.close()
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise ModelLoadError(
            f"{where}: the tokenizer has {tokenizer.vocab_size} tokens but the model's vocabulary "
            f"is {config.vocab_size}"
        )
    return WhisperModel(config, w, dt, dev, generation, tokenizer, where)


def load_whisper(
    path: str | os.PathLike[str],
    dtype: Any = None,
    device: Any = None,
    progress: bool | None = None,
) -> WhisperModel:
    """A Whisper model from a directory (or a .safetensors file / index inside one). dtype:
    float32 on the CPU device and float16 on CUDA by default."""
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file or directory", file=str(p))
    model_dir = p if p.is_dir() else p.parent
    config = read_whisper_config(model_dir)
    tok = Tokenizer.from_dir(model_dir) if (model_dir / "tokenizer.json").is_file() else None
    generation = read_generation_config(model_dir, config, tok)
    st = load_safetensors(p)
    try:
        return whisper_from_source(
            st, config, generation, dtype, device, tok, str(st.path), progress
        )
    finally:
        st.close()
