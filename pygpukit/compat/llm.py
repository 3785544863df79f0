"""The 0.2.x LLM API (``from pygpukit import llm``), over the engine in pygpukit.models.

- ``llm.SafeTensorsFile(path)`` (``num_tensors``, ``file_size``, ``tensor_names``),
  ``llm.load_safetensors(path)`` (also a sharded ``model.safetensors.index.json``).
- ``llm.detect_model_spec(tensor_names)`` -> ``GPT2_SPEC``, ``LLAMA_SPEC``, ``QWEN2_SPEC``,
  ``QWEN3_SPEC`` or ``MIXTRAL_SPEC``.
- ``llm.load_model_from_safetensors(path, dtype="float16", spec=None)`` ->
  ``CausalTransformerModel``. dtype defaults to float32 on the CPU device and float16 on CUDA
  when not given; the architecture comes from config.json.
- ``model.generate(input_ids, max_new_tokens=32, temperature=0.7, top_k=50, top_p=0.9,
  use_cache=True)``: the engine's generate (``llm.generate(model, ...)``,
  pygpukit.models.generation), whose defaults are the 0.2.x ones; prompt plus new ids out.
- Decode strategies with ``bind(model)`` (pygpukit.compat.decode): ``DecodeM1``,
  ``DecodeM1Graph`` (``init_graph(max_seq_len=...)`` captures the decode step as a CUDA graph
  on a GPU, the same captured step the engine's generate replays), ``DecodeBatch(batch_size=)``,
  ``DecodeJacobi``. Their generate runs the engine's stream / stream_batch, except Jacobi's.

Newer than 0.2.x, re-exported here for convenience: ``load_model`` (directory, safetensors or
GGUF, tokenizer attached), ``load_model_from_gguf``, ``ChatTemplate``, ``Tokenizer``,
``stream`` / ``stream_batch`` / ``generate`` (on a GPU these replay the decode step from a CUDA
graph by default: ``graph=None``).
"""

from __future__ import annotations

from pygpukit.compat.decode import (
    DecodeBatch,
    DecodeJacobi,
    DecodeM1,
    DecodeM1Graph,
    DecodeStrategy,
)
from pygpukit.models import (
    GPT2_SPEC,
    LLAMA_SPEC,
    MIXTRAL_SPEC,
    QWEN2_SPEC,
    QWEN3_MOE_SPEC,
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
    generate,
    load_model,
    load_model_from_gguf,
    load_model_from_safetensors,
    load_safetensors,
    stream,
    stream_batch,
)

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
    "generate",
    "load_model",
    "load_model_from_gguf",
    "load_model_from_safetensors",
    "load_safetensors",
    "stream",
    "stream_batch",
]
