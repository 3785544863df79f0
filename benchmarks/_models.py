"""Model shapes the decode benchmarks share, and random bf16 weights that HF transformers and
pygpukit load identically (HF initialises the model on the GPU; pygpukit loads the same tensors
through its ordinary loader)."""

from __future__ import annotations

from typing import Any

import ml_dtypes

CONFIGS: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5,
        rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        bos_token_id=1, eos_token_id=2,
    ),
    "qwen3-8b": dict(
        model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096,
        intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, rms_norm_eps=1e-6,
        rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2,
    ),
}  # fmt: skip


class TorchSource:
    """The models' TensorSource protocol over a torch state dict (bf16 on the host)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    @property
    def tensor_names(self) -> list[str]:
        return list(self.state)

    def tensor(self, name: str) -> Any:
        import torch

        t = self.state[name].detach()
        return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)


def hf_and_pygpukit(name: str, seed: int = 0) -> tuple[Any, Any]:
    """(HF model, pygpukit model) of config ``name`` with the same random bf16 weights, both on
    cuda:0."""
    import torch
    import transformers

    import pygpukit as gp
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.models.weights import load_weights

    cfg = dict(CONFIGS[name])
    hf_cfg = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16).eval()
    dev = gp.device("cuda:0")
    config = config_from_dict(cfg, source=name)
    weights = load_weights(TorchSource(hf.state_dict()), config, gp.bfloat16, dev, where=name)
    ours = CausalTransformerModel(config, weights, gp.bfloat16, dev, source=name)
    return hf, ours
