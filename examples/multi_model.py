"""Two LLMs and a batch job on one GPU at once, each in its own scheduler context.

    python examples/multi_model.py                  # SmolLM2-135M chat model + a Llama-3.2-1B-
                                                    # shape second model + bf16 matmuls, on cuda:0
    python examples/multi_model.py --tiny           # tiny random models (runs on the CPU too)

The contexts (pygpukit.scheduler): the chat model is Guaranteed (its memory held for it, never
paced, the device's highest stream priority), the second model Burstable (a reservation plus
headroom), the batch job BestEffort, capped to a share of the SMs (--batch-sms) and paced while a
Guaranteed context is active. Each model first generates alone in its context (greedy, the
reference), then all three run together under ``asyncio.gather``, each through
``pygpukit.scheduler.run`` (admitted as a task, run in a worker thread with its context current,
awaited through an event). Printed: per context tokens/s and the p50/p99 time between tokens,
alone and together, whether each model's tokens equal its solo run, the batch job's rate, and the
scheduler's snapshot. Exits 1 if any model's tokens differ.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import sys
import threading
import time
import zlib
from typing import Any

import numpy as np

import pygpukit as gp
from pygpukit import scheduler as sched
from pygpukit._units import parse_bytes
from pygpukit.models import SamplingParams, load_model
from pygpukit.models.config import config_from_dict
from pygpukit.models.generation import stream as gen_stream
from pygpukit.models.transformer import CausalTransformerModel
from pygpukit.models.weights import load_weights
from pygpukit.scheduler.report import format_snapshot

LLAMA_1B = dict(
    model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
    intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5,
    rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
    bos_token_id=1, eos_token_id=2,
)  # fmt: skip
SMOLLM2_135M = dict(
    model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=576,
    intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
    vocab_size=49152, rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=8192,
    tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
TINY = dict(
    model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
    intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=256, rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=512,
    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
)  # fmt: skip


class RandomWeights:
    """Random weights of a LLaMA-style config under the HF tensor names (the loader's
    TensorSource protocol): N(0, 0.02) matrices, unit norm weights, each tensor seeded by its
    name so that every load gives the same model."""

    def __init__(self, cfg: dict[str, Any], seed: int = 0) -> None:
        hd, inter, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
        d = cfg.get("head_dim", hd // heads)
        kv = cfg["num_key_value_heads"] * d
        self.seed = seed
        self.shapes: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (cfg["vocab_size"], hd),
            "model.norm.weight": (hd,),
        }
        if not cfg["tie_word_embeddings"]:
            self.shapes["lm_head.weight"] = (cfg["vocab_size"], hd)
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            self.shapes.update(
                {
                    p + "input_layernorm.weight": (hd,),
                    p + "post_attention_layernorm.weight": (hd,),
                    p + "self_attn.q_proj.weight": (heads * d, hd),
                    p + "self_attn.k_proj.weight": (kv, hd),
                    p + "self_attn.v_proj.weight": (kv, hd),
                    p + "self_attn.o_proj.weight": (hd, heads * d),
                    p + "mlp.gate_proj.weight": (inter, hd),
                    p + "mlp.up_proj.weight": (inter, hd),
                    p + "mlp.down_proj.weight": (hd, inter),
                }
            )

    @property
    def tensor_names(self) -> list[str]:
        return list(self.shapes)

    def tensor(self, name: str) -> np.ndarray:
        shape = self.shapes[name]
        if len(shape) == 1:
            return np.ones(shape, np.float32)
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)


def random_model(cfg: dict[str, Any], dtype: Any, device: Any) -> CausalTransformerModel:
    config = config_from_dict(cfg, source="random")
    dev = gp.device(device)
    weights = load_weights(RandomWeights(cfg), config, gp.as_dtype(dtype), dev, where="random")
    return CausalTransformerModel(config, weights, gp.as_dtype(dtype), dev, source="random")


def generate(model: CausalTransformerModel, prompt: list[int], n: int) -> dict[str, Any]:
    """Greedy ``n`` tokens (stop tokens off): the tokens, tokens/s and inter-token times."""
    stamps, tokens = [], []
    params = SamplingParams(temperature=0.0)
    for t in gen_stream(model, prompt, n, params, stop_ids=(), max_seq_len=len(prompt) + n):
        stamps.append(time.perf_counter())
        tokens.append(t)
    gp.synchronize(model.device)
    gaps = np.diff(stamps) * 1e3
    return {
        "tokens": tokens,
        "tok_s": len(gaps) / (stamps[-1] - stamps[0]) if len(gaps) else 0.0,
        "p50_ms": float(np.percentile(gaps, 50)) if len(gaps) else 0.0,
        "p99_ms": float(np.percentile(gaps, 99)) if len(gaps) else 0.0,
    }


class BatchJob:
    """n x n matmuls, 4 per sync of its own stream, from ``start()`` until ``stop`` is set;
    ``marks`` records (time, products completed) at each sync."""

    def __init__(self, n: int, dtype: Any) -> None:
        self.n, self.dtype = n, dtype
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.marks: list[tuple[float, int]] = []

    def __call__(self) -> None:
        rng = np.random.default_rng(5)
        a = gp.from_numpy(rng.standard_normal((self.n, self.n), np.float32)).astype(self.dtype)
        b = gp.from_numpy(rng.standard_normal((self.n, self.n), np.float32)).astype(self.dtype)
        c = gp.empty((self.n, self.n), self.dtype)
        gp.matmul(a, b, out=c)  # warm-up
        stream = gp.current_stream(a.device)
        stream.synchronize()
        ops = 0
        self.marks = [(time.perf_counter(), 0)]
        self.ready.set()
        while not self.stop.is_set():
            for _ in range(4):
                gp.matmul(a, b, out=c)
            stream.synchronize()  # this job's own stream only
            ops += 4
            self.marks.append((time.perf_counter(), ops))

    def rate(self, t0: float, t1: float) -> float:
        """Products per second completed between t0 and t1 (interpolated)."""
        ts, ns = zip(*self.marks, strict=True)
        done = np.interp(t1, ts, ns) - np.interp(t0, ts, ns)
        return float(done / (t1 - t0)) if t1 > t0 else 0.0


async def together(
    contexts: dict[str, sched.ScheduledContext], models: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    job = BatchJob(args.batch_n, args.dtype)
    batch = asyncio.create_task(sched.run(contexts["batch"], job, name="matmuls"))
    while not job.ready.is_set():  # its data is made before the models start
        if batch.done():
            await batch  # raises what the job raised
        await asyncio.sleep(0.005)
    t0 = time.perf_counter()
    gens = await asyncio.gather(
        *(
            sched.run(contexts[name], generate, m, prompt, args.tokens, name=f"{name} decode")
            for name, (m, prompt) in models.items()
        )
    )
    t1 = time.perf_counter()
    job.stop.set()
    await batch
    out = dict(zip(models, gens, strict=True))
    out["batch"] = {"ops_s": job.rate(t0, t1)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="tiny random models (CPU-sized)")
    ap.add_argument("--tokens", type=int, default=256, help="greedy tokens per model")
    ap.add_argument(
        "--chat-model",
        help="the chat model (default: SmolLM2-135M GGUF; 'random': random weights of its shape)",
    )
    ap.add_argument("--batch-sms", type=float, default=0.4, help="the batch job's SM cap")
    ap.add_argument("--batch-pace", type=float, default=0.5, help="its share of GPU time")
    ap.add_argument("--device", default=None, help="cuda:N or cpu (default: cuda:0 if present)")
    args = ap.parse_args()
    gpu = gp.is_cuda_available() and args.device != "cpu"
    device = args.device or ("cuda:0" if gpu else "cpu")
    args.dtype = "bfloat16" if gpu else "float32"
    args.batch_n = 64 if args.tiny else (8192 if gpu else 256)

    s = sched.initialize(device if gpu else "cpu")
    size = (lambda t: parse_bytes(t)) if not args.tiny else (lambda t: parse_bytes(t) // 64)
    contexts = {
        "chat": s.create_context("chat", size("2GB"), qos="guaranteed"),
        "second": s.create_context("second", size("8GB"), qos="burstable", reservation=size("4GB")),
        "batch": s.create_context(
            "batch", qos="best_effort", sm_share=args.batch_sms, pace=args.batch_pace
        ),
    }
    for c in contexts.values():
        print(f"[{c!r}]", file=sys.stderr)

    # Load each model inside its own context: its weights count against that context's budget.
    with sched.context_session(contexts["chat"]):
        if args.tiny or args.chat_model == "random":
            chat = random_model(TINY if args.tiny else SMOLLM2_135M, args.dtype, device)
            chat_prompt = list(range(3, 19))
        else:
            chat = load_model(args.chat_model, dtype="float16" if gpu else None, device=device)
            tok = chat.tokenizer
            assert tok is not None
            chat_prompt = tok.encode("Write a short poem about the sea.")
    with sched.context_session(contexts["second"]):
        cfg = dict(TINY, hidden_size=96, num_attention_heads=6) if args.tiny else LLAMA_1B
        second = random_model(cfg, args.dtype, device)
    models = {"chat": (chat, chat_prompt), "second": (second, list(range(100, 116)))}

    # Alone, each in its own context: the reference tokens and speeds.
    solo: dict[str, Any] = {}
    for name, (m, prompt) in models.items():
        with sched.context_session(contexts[name]):
            generate(m, prompt, args.tokens)  # warm-up (compiles, captures the step graph)
            solo[name] = generate(m, prompt, args.tokens)
    with sched.context_session(contexts["batch"]):
        job = BatchJob(args.batch_n, args.dtype)
        # A new thread starts outside every session: run it in a copy of this one.
        th = threading.Thread(target=contextvars.copy_context().run, args=(job,))
        th.start()
        job.ready.wait()
        t0 = time.perf_counter()
        time.sleep(1.0)
        t1 = time.perf_counter()
        job.stop.set()
        th.join()
        solo["batch"] = {"ops_s": job.rate(t0, t1)}

    both = asyncio.run(together(contexts, models, args))

    ok = True
    print(f"\n{'context':<8} {'qos':<12} {'SMs':<14} {'alone tok/s':>11} {'together':>9} "
          f"{'p50 ms':>7} {'p99 ms':>7}  tokens equal to the solo run")  # fmt: skip
    for name in models:
        c, a, t = contexts[name], solo[name], both[name]
        same = t["tokens"] == a["tokens"]
        ok &= same
        sms = "all" if c.sm_count is None else f"{c.sm_count} ({c.placement})"
        print(
            f"{name:<8} {c.qos:<12} {sms:<14} {a['tok_s']:>11.1f} {t['tok_s']:>9.1f} "
            f"{t['p50_ms']:>7.2f} {t['p99_ms']:>7.2f}  {'yes' if same else 'NO'}"
        )
    c = contexts["batch"]
    sms = "all" if c.sm_count is None else f"{c.sm_count} ({c.placement})"
    print(
        f"{'batch':<8} {c.qos:<12} {sms:<14} {solo['batch']['ops_s']:>11.1f} "
        f"{both['batch']['ops_s']:>9.1f}  matmuls/s ({args.batch_n}^2 {args.dtype}; together: "
        "while the models decoded)"
    )
    print("\n" + format_snapshot(s.snapshot()))
    s.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
