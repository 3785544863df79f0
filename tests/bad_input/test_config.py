"""config.json fields of the wrong type or range are named in the ModelLoadError."""

from __future__ import annotations

from typing import Any

import pytest
from models._util import tiny_llama_config

from pygpukit.models import ModelLoadError, config_from_dict

pytestmark = pytest.mark.filterwarnings("error")

GPT2 = {"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 1, "vocab_size": 16,
        "n_positions": 32}  # fmt: skip

BAD: list[tuple[str, Any]] = [
    ("hidden_size", "64"),
    ("hidden_size", 64.0),
    ("hidden_size", True),
    ("num_attention_heads", 0),
    ("num_hidden_layers", -2),
    ("vocab_size", [1]),
    ("num_key_value_heads", "2"),
    ("num_key_value_heads", -1),
    ("head_dim", 1.5),
    ("rms_norm_eps", "1e-5"),
    ("rms_norm_eps", -1.0),
    ("rms_norm_eps", float("nan")),
    ("rope_theta", "10000"),
    ("rope_theta", [10000]),
    ("tie_word_embeddings", "false"),
    ("attention_bias", 1),
    ("eos_token_id", "2"),
    ("eos_token_id", [1, "x"]),
    ("bos_token_id", -1),
    ("bos_token_id", 1.0),
    ("max_position_embeddings", "2048"),
    ("intermediate_size", None),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_bad_llama_field_is_named(field: str, value: Any) -> None:
    cfg = tiny_llama_config(**{field: value})
    with pytest.raises(ModelLoadError) as e:
        config_from_dict(cfg, "cfg.json")
    assert repr(field) in str(e.value) and "cfg.json" in str(e.value)
    assert e.value.field == field and e.value.file == "cfg.json"
    assert config_from_dict(tiny_llama_config(), "cfg.json").hidden_size == cfg_ok_hidden()


def cfg_ok_hidden() -> int:
    return int(tiny_llama_config()["hidden_size"])


@pytest.mark.parametrize(
    ("field", "value"),
    [("n_embd", "8"), ("n_inner", -4), ("layer_norm_epsilon", "x"), ("n_positions", 0),
     ("scale_attn_by_inverse_layer_idx", "yes")],
)  # fmt: skip
def test_bad_gpt2_field_is_named(field: str, value: Any) -> None:
    with pytest.raises(ModelLoadError) as e:
        config_from_dict({**GPT2, field: value}, "gpt2.json")
    assert repr(field) in str(e.value) and e.value.field == field
    assert config_from_dict(GPT2, "gpt2.json").hidden_size == 8
