"""Mixture-of-experts on the GPU: the grouped expert MLP against torch, and an MoE decode
against HF transformers.

    python benchmarks/moe.py [--tokens 1 16 256 4096] [--backends auto triton native]
                             [--decode-new 64] [--json OUT]

1. The expert MLP of one layer for given routing (top-k ids and weights from gp.moe_router on
   random router logits): gp = moe_align + moe_linear (gate and up with silu fused) + moe_linear
   (down, routing weight fused) + the sum over each token's k rows; torch = a loop of cuBLAS
   GEMMs over the experts that got tokens (gather, F.linear x3, index_add_; its counts go to the
   host, as in HF's loop), and torch._grouped_mm (permutation by argsort on the device, the
   grouped products, the weighted sum) where it runs. Mixtral-8x7B (H 4096, I 14336, 8 experts,
   top-2) and Qwen3-30B-A3B (H 2048, I 768, 128 experts, top-8) layer shapes, bf16, median
   device time with the L2 flushed. Bound columns: the bytes of the experts that got tokens over
   the measured copy bandwidth, and TFLOP/s.
2. Mixtral-8x7B's shapes with 2 layers (benchmarks/_models.py "mixtral-8x7b-2l"), random bf16
   weights made by HF on the GPU and loaded into pygpukit from the same tensors: greedy decode
   tok/s at batch 1 (16-token prompt, --decode-new tokens, stop tokens off), pygpukit's step
   replayed from a CUDA graph vs HF eager generate, and the fraction of the bound (the weight
   bytes one token reads: attention, router, 2 experts a layer, the head).
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ml_dtypes
import numpy as np

import pygpukit as gp
from pygpukit.benchmark.timing import DeviceTimer
from pygpukit.models import GenerationStats
from pygpukit.models.moe import block_rows

SHAPES = {"mixtral-8x7b": (4096, 14336, 8, 2), "qwen3-30b-a3b": (2048, 768, 128, 8)}


def _gp_mlp(x: Any, ids: Any, wts: Any, wg: Any, wu: Any, wd: Any, e: int, k: int) -> Any:
    t, h = x.shape
    rows, be = gp.moe_align(ids, e, block_rows(t * k, e))
    a = gp.moe_linear(x, wg, rows, be, k, w_up=wu)
    y = gp.moe_linear(a, wd, rows, be, 1, row_scale=wts.reshape(t * k))
    return gp.sum(y.reshape(t, k, h), axis=1)


def _torch_loop(torch: Any, x: Any, ids: Any, wts: Any, wg: Any, wu: Any, wd: Any) -> Any:
    f = torch.nn.functional
    k = ids.shape[1]
    out = torch.zeros_like(x)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=wg.shape[0]).tolist()  # host read, as HF's loop
    start = 0
    for e, c in enumerate(counts):
        if c == 0:
            continue
        rows = order[start : start + c]
        start += c
        tok = rows // k
        xe = x[tok]
        y = f.linear(f.silu(f.linear(xe, wg[e])) * f.linear(xe, wu[e]), wd[e])
        out.index_add_(0, tok, y * wts.reshape(-1)[rows, None].to(y.dtype))
    return out


def _torch_grouped(torch: Any, x: Any, ids: Any, wts: Any, wgu_t: Any, wd_t: Any) -> Any:
    """torch._grouped_mm over the rows sorted by expert (offsets on the device, no host read);
    wgu_t [E, H, 2I] (gate then up), wd_t [E, I, H]."""
    f = torch.nn.functional
    k = ids.shape[1]
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=wgu_t.shape[0]), 0).to(torch.int32)
    xs = x[order // k]
    gu = torch._grouped_mm(xs, wgu_t, offs=offs)
    i = wd_t.shape[1]
    a = f.silu(gu[:, :i]) * gu[:, i:]
    y = torch._grouped_mm(a, wd_t, offs=offs) * wts.reshape(-1)[order, None].to(x.dtype)
    out = torch.zeros_like(x)
    return out.index_add_(0, order // k, y)


def grouped(
    timer: DeviceTimer, tokens: list[int], copy_gbs: float, backends: list[str]
) -> list[dict[str, Any]]:
    torch = timer.torch
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for name, (h, i, e, k) in SHAPES.items():
        wg, wu = (rng.standard_normal((e, i, h), np.float32) * 0.02 for _ in range(2))
        wd = rng.standard_normal((e, h, i), np.float32) * 0.02
        g_w = [gp.from_numpy(a.astype(ml_dtypes.bfloat16), device="cuda:0") for a in (wg, wu, wd)]
        t_w = None
        if torch is not None:
            t_w = [torch.from_dlpack(a) for a in g_w]
            wgu_t = torch.cat([t_w[0], t_w[1]], 1).transpose(1, 2).contiguous()
            wd_t = t_w[2].transpose(1, 2).contiguous()
        for t in tokens:
            x = gp.from_numpy(rng.standard_normal((t, h), np.float32).astype(ml_dtypes.bfloat16),
                              device="cuda:0")  # fmt: skip
            logits = gp.from_numpy(rng.standard_normal((t, e), np.float32), device="cuda:0")
            ids, wts = gp.moe_router(logits, k)
            used = len(np.unique(ids.to_numpy()))
            nbytes = used * 3 * h * i * 2
            flops = 2 * t * k * 3 * h * i
            row: dict[str, Any] = {"shape": name, "tokens": t, "experts_used": used}
            best = float("inf")
            for b in backends:  # moe_linear's backend ("auto": the routing table's choice)
                with gp.route(moe_linear=b):
                    sec = timer.median_seconds(partial(_gp_mlp, x, ids, wts, *g_w, e, k))
                tag = "gp" if b == "auto" else f"gp_{b}"
                row[f"{tag}_us"] = sec * 1e6
                row[f"{tag}_frac_of_bw_bound"] = nbytes / sec / 1e9 / copy_gbs
                row[f"{tag}_tflops"] = flops / sec / 1e12
                best = min(best, sec)
            if torch is not None and t_w is not None:
                tx, tid, tw = (torch.from_dlpack(a) for a in (x, ids, wts))
                tid = tid.long()
                loop = timer.median_seconds(partial(_torch_loop, torch, tx, tid, tw, *t_w))
                row["torch_loop_us"] = loop * 1e6
                try:
                    gm = timer.median_seconds(
                        partial(_torch_grouped, torch, tx, tid, tw, wgu_t, wd_t)
                    )
                    row["torch_grouped_mm_us"] = gm * 1e6
                except Exception as exc:  # older torch or a shape it refuses: say which
                    row["torch_grouped_mm_us"] = f"n/a ({type(exc).__name__})"
            peers = [v for kk, v in row.items() if kk.startswith("torch_") and isinstance(v, float)]
            if peers:
                row["gp_best_vs_best_torch"] = min(peers) / (best * 1e6)
            rows.append(row)
            print(_fmt(row), flush=True)
    return rows


def _fmt(row: dict[str, Any]) -> str:
    return "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())


def decode(timer: DeviceTimer, new: int, copy_gbs: float) -> dict[str, Any]:
    import torch

    from benchmarks._models import CONFIGS, hf_and_pygpukit

    cfg = CONFIGS["mixtral-8x7b-2l"]
    hf, ours = hf_and_pygpukit("mixtral-8x7b-2l")
    prompt = [int(v) for v in np.random.default_rng(1).integers(3, cfg["vocab_size"], 16)]
    ids = torch.tensor([prompt], device="cuda")

    def hf_run() -> None:
        with torch.no_grad():
            hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                        min_new_tokens=new, do_sample=False)  # fmt: skip
        torch.cuda.synchronize()

    stats: list[GenerationStats] = []

    def run() -> list[int]:
        stats.append(GenerationStats())
        out = ours.generate(
            prompt, new, temperature=0, stop_token_ids=(), graph=True, stats=stats[-1]
        )
        gp.synchronize()
        return out

    hf_run()
    run()
    assert stats[-1].decode_mode.startswith("CUDA graph"), stats[-1].decode_mode

    def rate(fn: Any) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return new / statistics.median(times)

    hf_tps, ours_tps = rate(hf_run), rate(run)
    decode_tps = statistics.median(s.decode_tokens_per_s for s in stats[-3:])
    h, i, v, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["head_dim"]
    layers = cfg["num_hidden_layers"]
    attn = h * d * (cfg["num_attention_heads"] * 2 + cfg["num_key_value_heads"] * 2)
    token_bytes = 2 * (layers * (attn + 2 * 3 * h * i + 8 * h) + v * h)
    bound = copy_gbs * 1e9 / token_bytes
    row = {"model": "mixtral-8x7b-2l", "new": new, "gp_graph_tok_s": ours_tps,
           "gp_decode_only_tok_s": decode_tps, "hf_eager_tok_s": hf_tps,
           "vs_hf": ours_tps / hf_tps, "bound_tok_s": bound,
           "frac_of_bound": ours_tps / bound}  # fmt: skip
    print(_fmt(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 256, 4096])
    p.add_argument("--decode-new", type=int, default=64)
    p.add_argument(
        "--backends",
        nargs="+",
        default=["auto"],
        choices=["auto", "triton", "native"],
        help="moe_linear backends to time (auto: the routing table's choice)",
    )
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    timer = DeviceTimer(0)
    copy_gbs = timer.copy_rate()
    print(f"device copy {copy_gbs:.0f} GB/s (read + write)", flush=True)
    res: dict[str, Any] = {"copy_gbs": copy_gbs}
    res["grouped"] = grouped(timer, args.tokens, copy_gbs, args.backends)
    if not args.skip_decode and timer.torch is not None:
        res["decode"] = decode(timer, args.decode_new, copy_gbs)
    text = json.dumps(res, default=str)
    if args.json:
        Path(args.json).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
