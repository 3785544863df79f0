"""The LLM engine: model specs, loading (safetensors, GGUF), tokenizer and chat template, the
causal transformer built from pygpukit ops, static KV cache, sampling, and generation (one loop:
generation.stream_batch, with CUDA-graph decode steps). The 0.2.x names (``from pygpukit import
llm``, the decode strategies) live in pygpukit.compat, which imports this package, never the
reverse."""

from __future__ import annotations

from pygpukit.models.chat_template import ChatTemplate, ThinkFilter
from pygpukit.models.config import (
    GPT2_SPEC,
    LLAMA_SPEC,
    MIXTRAL_SPEC,
    QWEN2_SPEC,
    QWEN3_MOE_SPEC,
    QWEN3_SPEC,
    ModelConfig,
    ModelSpec,
    config_from_dict,
    detect_model_spec,
    read_config,
)
from pygpukit.models.errors import ContextLengthError, ModelLoadError, UnsupportedModelError
from pygpukit.models.generation import GenerationStats, generate, stream, stream_batch
from pygpukit.models.kv_cache import StaticKVCache
from pygpukit.models.loader import (
    default_model_path,
    load_model,
    load_model_from_gguf,
    load_model_from_safetensors,
)
from pygpukit.models.safetensors_io import SafeTensorsFile, ShardedSafeTensors, load_safetensors
from pygpukit.models.sampling import Sampler, SamplingParams
from pygpukit.models.tokenizer import StreamDecoder, Tokenizer
from pygpukit.models.transformer import CausalTransformerModel

__all__ = [
    "GPT2_SPEC",
    "LLAMA_SPEC",
    "MIXTRAL_SPEC",
    "QWEN3_MOE_SPEC",
    "QWEN2_SPEC",
    "QWEN3_SPEC",
    "CausalTransformerModel",
    "ChatTemplate",
    "ContextLengthError",
    "GenerationStats",
    "ModelConfig",
    "ModelLoadError",
    "ModelSpec",
    "SafeTensorsFile",
    "Sampler",
    "SamplingParams",
    "ShardedSafeTensors",
    "StaticKVCache",
    "StreamDecoder",
    "ThinkFilter",
    "Tokenizer",
    "UnsupportedModelError",
    "config_from_dict",
    "default_model_path",
    "detect_model_spec",
    "generate",
    "load_model",
    "load_model_from_gguf",
    "load_model_from_safetensors",
    "load_safetensors",
    "read_config",
    "stream",
    "stream_batch",
]
