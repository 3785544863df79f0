"""Bad inputs fail with a clear exception naming the problem, and the process stays usable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pygpukit import llm
from pygpukit.models import (
    ContextLengthError,
    ModelLoadError,
    UnsupportedModelError,
    config_from_dict,
    load_model,
)

from ._util import FIXTURES, golden, tiny_llama_config


def _copy(tmp_path: Path, arch: str = "llama") -> Path:
    d = tmp_path / arch
    shutil.copytree(FIXTURES / arch, d)
    return d


def _still_works() -> None:
    model = load_model(FIXTURES / "llama", device="cpu")
    g = golden("llama")
    out = model.generate(g["prompts"][0], 4, temperature=0, stop_token_ids=())
    assert out[len(g["prompts"][0]) :] == g["greedy"][0][:4]


def test_missing_config(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "config.json").unlink()
    with pytest.raises(ModelLoadError, match=r"config\.json is missing"):
        load_model(d, device="cpu")
    _still_works()


def test_corrupt_config(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "config.json").write_text('{"model_type": "llama", "hidden_size": 64,')
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(d, device="cpu")
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(ModelLoadError, match="missing field 'num_attention_heads'"):
        load_model(d, device="cpu")
    bad = tiny_llama_config(num_hidden_layers=-2)
    (d / "config.json").write_text(json.dumps(bad))
    with pytest.raises(ModelLoadError, match="num_hidden_layers"):
        load_model(d, device="cpu")
    _still_works()


def test_config_disagreeing_with_the_weights(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "config.json").write_text(json.dumps(tiny_llama_config(intermediate_size=100)))
    with pytest.raises(ModelLoadError, match=r"gate_proj.weight' has shape \(128, 64\)"):
        load_model(d, device="cpu")


def test_unknown_architecture(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "config.json").write_text(json.dumps(tiny_llama_config(model_type="bert")))
    with pytest.raises(UnsupportedModelError, match="model_type 'bert' is not supported"):
        load_model(d, device="cpu")
    with pytest.raises(UnsupportedModelError, match="cannot detect the architecture"):
        llm.detect_model_spec(["encoder.layer.0.attention.self.query.weight"])
    with pytest.raises(UnsupportedModelError, match="rope scaling 'yarn'"):
        config_from_dict(tiny_llama_config(rope_parameters={"rope_type": "yarn", "factor": 4.0}))
    _still_works()


def test_truncated_safetensors(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelLoadError, match="truncated safetensors file: tensor"):
        load_model(d, device="cpu")
    f.write_bytes(data[:4])
    with pytest.raises(ModelLoadError, match="truncated safetensors file"):
        llm.SafeTensorsFile(f)
    f.write_bytes((50).to_bytes(8, "little") + b"{not json" + b" " * 60)
    with pytest.raises(ModelLoadError, match="corrupt safetensors header"):
        llm.SafeTensorsFile(f)
    _still_works()


def test_missing_shard(tmp_path: Path) -> None:
    d = _copy(tmp_path, "qwen2")
    (d / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"model-00002-of-00002\.safetensors: safetensors"):
        load_model(d, device="cpu")


def test_gguf_with_unsupported_quantization(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "iq4.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    qt = gguf.GGMLQuantizationType.IQ4_NL  # 32 values in 18 bytes; not read here
    raw = np.random.default_rng(0).integers(0, 255, (4, 36), dtype=np.uint8)
    w.add_tensor("blk.0.attn_q.weight", raw, raw_dtype=qt)
    w.add_tensor("output_norm.weight", np.ones(64, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedModelError, match=r"unsupported quantization.*IQ4_NL"):
        load_model(path, device="cpu")
    _still_works()


def test_not_a_gguf_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"GGUF" + b"\x00" * 10)
    with pytest.raises(ModelLoadError, match="not a readable GGUF file"):
        load_model(path, device="cpu")


def test_prompt_longer_than_the_context() -> None:
    model = load_model(FIXTURES / "gpt2", device="cpu")  # n_positions 256
    with pytest.raises(ContextLengthError, match="256 tokens"):
        model.generate(list(range(3, 259)), 4, temperature=0)
    with pytest.raises(ContextLengthError):
        llm.DecodeM1().bind(model).generate(list(range(3, 300)), 4)
    cache = model.new_cache(1, 8)
    with pytest.raises(ContextLengthError, match="KV cache holds 8"):
        model.forward([list(range(3, 12))], cache)
    with pytest.raises(ValueError, match="outside"):
        model.generate([5, 400], 2, temperature=0)
    # A prompt that nearly fills the context still gets the tokens that fit.
    out = model.generate(list(range(3, 257)), 8, temperature=0, stop_token_ids=())
    assert len(out) == 256
    _still_works()
