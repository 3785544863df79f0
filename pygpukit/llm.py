"""``from pygpukit import llm``: the 0.2.x LLM API, kept working over pygpukit.models.

- ``llm.SafeTensorsFile(path)`` (``num_tensors``, ``file_size``, ``tensor_names``),
  ``llm.load_safetensors(path)`` (also a sharded ``model.safetensors.index.json``).
- ``llm.detect_model_spec(tensor_names)`` -> ``GPT2_SPEC``, ``LLAMA_SPEC``, ``QWEN2_SPEC``,
  ``QWEN3_SPEC`` or ``MIXTRAL_SPEC``.
- ``llm.load_model_from_safetensors(path, dtype="float16", spec=None)`` ->
  ``CausalTransformerModel``; ``model.generate(input_ids, max_new_tokens=32, temperature=0.7,
  top_k=50, top_p=0.9, use_cache=True)``. dtype defaults to float32 on the CPU device and
  float16 on CUDA when not given; the architecture comes from config.json.
- Decode strategies with ``bind(model)``: ``DecodeM1``, ``DecodeM1Graph`` (``init_graph``;
  CUDA graphs are not captured in this version, see its docstring), ``DecodeBatch(batch_size=)``,
  ``DecodeJacobi``.
New in this version: ``load_model`` (directory, safetensors or GGUF, tokenizer attached),
``load_model_from_gguf``, ``ChatTemplate``, ``Tokenizer``, ``stream`` / ``stream_batch``.
"""

from __future__ import annotations

from pygpukit.models import (
    GPT2_SPEC,
    LLAMA_SPEC,
    MIXTRAL_SPEC,
    QWEN2_SPEC,
    QWEN3_SPEC,
    CausalTransformerModel,
    ChatTemplate,
    ContextLengthError,
    GenerationStats,
    ModelConfig,
    ModelLoadError,
    ModelSpec,
    SafeTensorsFile,
    SamplingParams,
    ShardedSafeTensors,
    StaticKVCache,
    Tokenizer,
    UnsupportedModelError,
    default_model_path,
    detect_model_spec,
    load_model,
    load_model_from_gguf,
    load_model_from_safetensors,
    load_safetensors,
    stream,
    stream_batch,
)
from pygpukit.models.decode import (
    DecodeBatch,
    DecodeJacobi,
    DecodeM1,
    DecodeM1Graph,
    DecodeStrategy,
)

__all__ = [
    "GPT2_SPEC",
    "LLAMA_SPEC",
    "MIXTRAL_SPEC",
    "QWEN2_SPEC",
    "QWEN3_SPEC",
    "CausalTransformerModel",
    "ChatTemplate",
    "ContextLengthError",
    "DecodeBatch",
    "DecodeJacobi",
    "DecodeM1",
    "DecodeM1Graph",
    "DecodeStrategy",
    "GenerationStats",
    "ModelConfig",
    "ModelLoadError",
    "ModelSpec",
    "SafeTensorsFile",
    "SamplingParams",
    "ShardedSafeTensors",
    "StaticKVCache",
    "Tokenizer",
    "UnsupportedModelError",
    "default_model_path",
    "detect_model_spec",
    "load_model",
    "load_model_from_gguf",
    "load_model_from_safetensors",
    "load_safetensors",
    "stream",
    "stream_batch",
]
