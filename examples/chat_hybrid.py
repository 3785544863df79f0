"""Chat with a model whose ops run on a mix of backends ("hybrid" routing), using the Python API.

    python examples/chat_hybrid.py                                   # SmolLM2-135M, default routes
    python examples/chat_hybrid.py --route rmsnorm:native,softmax:triton --prompt "Hi!"
    python examples/chat_hybrid.py --model path/to/Qwen3-0.6B --think hide

Every op of the transformer goes through pygpukit's routing table; --route overrides the choice
per op for this run (``with gp.route(...)``), and the table of what actually ran is printed at the
end. Without a GPU everything runs on the NumPy backend. The full CLI is ``python -m pygpukit
chat``; this file shows the same steps in a few lines of API.
"""

from __future__ import annotations

import argparse
import sys

import pygpukit as gp
from pygpukit.models import SamplingParams, load_model
from pygpukit.models.chat import ChatSession


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model directory or FILE.gguf (default: SmolLM2-135M GGUF)")
    ap.add_argument("--route", default="", help="e.g. rmsnorm:native,softmax:triton")
    ap.add_argument("--prompt", default="Name three planets of the solar system.")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--think", choices=("show", "hide", "off"), default="hide")
    args = ap.parse_args()

    model = load_model(args.model)  # GPU when present, float32 on CPU
    print(f"[{model}]", file=sys.stderr)
    session = ChatSession(
        model,
        sampling=SamplingParams(temperature=args.temperature),
        max_new_tokens=args.max_new_tokens,
        max_seq_len=2048,
        think=args.think,
    )
    gp.routing.reset_stats()
    with gp.route(args.route or None):
        for piece in session.send(args.prompt):
            print(piece, end="", flush=True)
    print()
    st = session.last_stats
    print(
        f"[prefill {st.prefill_tokens_per_s:.1f} tok/s, decode {st.decode_tokens_per_s:.1f} tok/s]",
        file=sys.stderr,
    )
    for op, by in gp.routing.stats().items():
        print(f"  {op:<12} " + ", ".join(f"{b}: {n}" for b, n in by.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
