"""GGUF block formats on the GPU: the products that read the blocks in place, and a GGUF model
kept quantized against the same file dequantized at load.

    python benchmarks/quantized.py [--formats q4_k q8_0 ...] [--rows 1 16 64 512 4096]
                              [--model FILE.gguf] [--new 256] [--sweep] [--json OUT]

1. gp.linear_quantized(x, W) for W in a GGUF format (random blocks, bf16 x) at Llama-3.2-1B
   (2048x2048, 8192x2048, 2048x8192) and Llama-3-8B (14336x4096, 4096x14336) projection shapes,
   for each number of rows of x, against the dense bf16 product of the same shape in the same
   run (gp.linear = cuBLASLt, and torch's F.linear when torch is importable). Median device time
   with the L2 flushed; the bound column is the weight bytes (as stored) over the measured copy
   bandwidth, so "% bw" is the fraction of the device limit one product reaches.
2. --model FILE.gguf: the file loaded with quantize="stored" and "dequantize" (float16): device
   bytes of the weights against the file's tensor bytes, greedy decode tok/s at batch 1 from the
   CUDA graph (--new tokens after a short chat prompt, stop tokens off) and the greedy agreement
   (tokens identical up to the first difference) between the two.
3. --at-load NAME [--layers L] [--at-load-modes ...] [--variants ...]: a
   benchmarks/_models.py config (its first L layers, random bf16 weights) loaded dense and
   quantized at load (fp8, int4, nvfp4, w8a8): weight bytes, greedy decode tok/s at batch 1 from
   the CUDA graph, and prefill tok/s of a 1024-token prompt; --variants runs each quantized
   mode in turn as shipped ("default"), with the native decode GEMV's early launch off
   ("gemv-pdl-off"), with the gated MLP's gate/up product in one launch for every format
   ("gated-mlp": op gemv_<format>_silu_mul, shipped for int4 only) and in two for every format
   ("two-launch-mlp": linear_quantized + silu_mul), the step graph recaptured at each switch
   (--gemv-pdl on off: the same as --variants default gemv-pdl-off).
4. --moe FORMAT: one Mixtral-8x7B layer's expert MLP with its experts in FORMAT (random blocks,
   gp.moe_linear over QuantizedWeight experts) against the dense bf16 experts, at --moe-tokens
   tokens (default 1, 16, 256).
5. --sweep: the CUDA-core configurations (BN, groups of 32 values a K tile, warps) for 1 and 2
   rows of x, on the --formats at 14336x4096 and 2048x8192, printed best first
   (backends/triton_kernels/gguf.py's linear_config takes its CUDA-core tile from it; the
   tensor-core tiles there and in experts_config come from a sweep of those functions' tiles
   recorded in BENCHMARKS.md, "GGUF with more rows").
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))  # _models

import numpy as np
from _dense_peer import dense_peers

import pygpukit as gp
from pygpukit._gguf_planes import half_fields
from pygpukit.backends.triton_kernels import gguf as tg
from pygpukit.benchmark.timing import DeviceTimer
from pygpukit.qweight import GGUF_BLOCKS

SHAPES = [(2048, 2048), (8192, 2048), (2048, 8192), (14336, 4096), (4096, 14336)]


def random_weight(fmt: str, n: int, k: int, seed: int = 0) -> gp.QuantizedWeight:
    """Random blocks with finite float16 scales (tests/_gguf_ref.py's recipe), on the GPU."""
    qk, bb = GGUF_BLOCKS[fmt]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(n, k // qk, bb), dtype=np.uint8)
    for off in half_fields(fmt):
        h = (rng.uniform(-1, 1, size=raw.shape[:2]) * 0.01).astype(np.float16)
        raw[:, :, off : off + 2] = h.view(np.uint8).reshape(*raw.shape[:2], 2)
    return gp.QuantizedWeight(fmt, gp.from_numpy(raw.reshape(n, -1), device="cuda:0"))


def products(
    timer: DeviceTimer, fmts: list[str], rows: list[int], copy_gbs: float
) -> list[dict[str, Any]]:
    out = []
    print(f"{'shape':>12} {'fmt':>5} {'M':>5} {'us':>9} {'% bw':>6} {'bf16 gp':>9} "
          f"{'bf16 torch':>10} {'x gp':>6}", flush=True)  # fmt: skip
    for n, k, m, x, t_dense, t_torch in dense_peers(timer, SHAPES, rows):
        for fmt in fmts:
            qw = random_weight(fmt, n, k)
            t = timer.median_seconds(lambda x=x, qw=qw: gp.linear_quantized(x, qw))
            bw = qw.nbytes / t / (copy_gbs * 1e9)
            row = {
                "n": n, "k": k, "m": m, "fmt": fmt, "us": t * 1e6, "bw_frac": bw,
                "bf16_gp_us": t_dense * 1e6,
                "bf16_torch_us": None if t_torch is None else t_torch * 1e6,
                "tflops": 2 * m * n * k / t / 1e12,
            }  # fmt: skip
            out.append(row)
            tt = "-" if t_torch is None else f"{t_torch * 1e6:10.1f}"
            print(f"{n:>6}x{k:<5} {fmt:>5} {m:>5} {t * 1e6:9.1f} {100 * bw:5.0f}% "
                  f"{t_dense * 1e6:9.1f} {tt:>10} {t_dense / t:6.2f}", flush=True)  # fmt: skip
    return out


def sweep(timer: DeviceTimer, fmts: list[str], copy_gbs: float) -> list[dict[str, Any]]:
    """CUDA-core configurations for one and two rows (module docstring)."""
    best = []
    orig = tg.linear_config
    try:
        for m in (1, 2):
            for fmt in fmts:
                for n, k in (SHAPES[3], SHAPES[2]):
                    qw = random_weight(fmt, n, k)
                    x = gp.from_numpy(np.ones((m, k), np.float32), device="cuda:0").astype(
                        "bfloat16"
                    )
                    res = []
                    for bn in (1, 2, 4):
                        for gs in (16, 32, 64):
                            for warps in (1, 2):
                                if bn * gs < 16 * warps:
                                    continue
                                tg.linear_config = lambda mm, half, c=(m, bn, gs, warps): (  # type: ignore[assignment]
                                    False,
                                    *c,
                                )
                                t = timer.median_seconds(
                                    lambda x=x, qw=qw: gp.linear_quantized(x, qw), rounds=10
                                )
                                res.append((t, bn, gs, warps))
                    res.sort()
                    t, bn, gs, warps = res[0]
                    frac = qw.nbytes / t / (copy_gbs * 1e9)
                    print(f"sweep m={m} {fmt} {n}x{k}: best BN={bn} G={gs} warps={warps} "
                          f"{t * 1e6:.1f} us ({100 * frac:.0f}% bw); next "
                          f"{[(round(r[0] * 1e6, 1), *r[1:]) for r in res[1:4]]}",
                          flush=True)  # fmt: skip
                    best.append({"m": m, "fmt": fmt, "n": n, "k": k, "bn": bn, "groups": gs,
                                 "warps": warps, "us": t * 1e6, "bw_frac": frac})  # fmt: skip
    finally:
        tg.linear_config = orig  # type: ignore[assignment]
    return best


def model(path: str, new: int) -> dict[str, Any]:
    from pygpukit.models import GenerationStats, SamplingParams, load_model
    from pygpukit.models.chat import ChatSession
    from pygpukit.models.gguf_io import GGUFSource

    file_bytes = GGUFSource(path).total_bytes
    res: dict[str, Any] = {"file_tensor_bytes": file_bytes}
    outs = {}
    for mode in ("stored", "dequantize"):
        m = load_model(path, dtype="float16", device="cuda:0", progress=False, quantize=mode)
        session = ChatSession(m, sampling=SamplingParams(temperature=0), max_seq_len=1024)
        ids = session.render(
            [{"role": "user", "content": "Write a short story about a robot who paints."}]
        )
        m.generate(ids, 16, temperature=0, stop_token_ids=())  # warm-up: compile and capture
        rates = []
        for _ in range(3):
            st = GenerationStats()
            out = m.generate(ids, new, temperature=0, stop_token_ids=(), stats=st)
            rates.append(st.decode_tokens_per_s)
        outs[mode] = out[len(ids) :]
        fm = {k: round(v / 2**20, 2) for k, v in m.weights.formats().items()}
        res[mode] = {
            "weight_bytes": m.weights.nbytes(),
            "formats_mib": fm,
            "decode_tok_s": sorted(rates)[1],
            "mode": st.decode_mode,
        }
        print(f"{mode}: weights {m.weights.nbytes() / 2**20:.1f} MiB ({fm}), decode "
              f"{sorted(rates)[1]:.0f} tok/s ({st.decode_mode})", flush=True)  # fmt: skip
        del session, m
    a, b = outs["stored"], outs["dequantize"]
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))
    res["greedy_identical_prefix"] = same
    print(f"file tensors {file_bytes / 2**20:.1f} MiB; greedy identical for {same} of {len(a)} "
          "tokens", flush=True)  # fmt: skip
    return res


# --variants: the switches each one sets (backends/native/gemv.PDL_LAUNCH, ops/gemv.
# QUANT_GATED_GEMV: None leaves the gate/up product to QUANT_GATED_FORMATS) and the suffix of
# its result key.
VARIANTS: dict[str, tuple[tuple[bool, bool | None], str]] = {
    "default": ((True, None), ""),
    "gemv-pdl-off": ((False, None), ", native GEMV PDL off"),
    "gated-mlp": ((True, True), ", gate/up in one launch"),
    "two-launch-mlp": ((True, False), ", gate/up in two launches"),
}


def at_load(
    name: str, layers: int, new: int, modes: list[str], variants: list[str]
) -> dict[str, Any]:
    """A benchmarks/_models.py config cut to ``layers`` layers, random bf16 weights, loaded
    dense ("bf16") and with quantize= each of ``modes`` ("fp8" / "int4" / "nvfp4" / "w8a8"):
    weight bytes, greedy decode tok/s at batch 1 from the CUDA graph, and prefill tok/s of a
    1024-token prompt (the mixed-input GEMM's rows). variants: VARIANTS keys, each quantized
    mode run with each in turn."""
    from _models import CONFIGS, RandomBf16, hf_shapes, random_prompts

    from pygpukit.backends.native import gemv as native_gemv
    from pygpukit.models import GenerationStats
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.models.weights import load_weights

    # the module (pygpukit.ops.gemv the attribute is the function gp.gemv)
    ops_gemv = importlib.import_module("pygpukit.ops.gemv")

    cfg = dict(CONFIGS[name], num_hidden_layers=layers)
    config = config_from_dict(cfg, source=name)
    dev = gp.device("cuda:0")
    prompt = random_prompts(cfg, 1)[0]
    long_prompt = random_prompts(cfg, 1, length=1024)[0]
    res: dict[str, Any] = {"model": f"{name}, {layers} layers"}
    try:
        for name_mode in modes:
            mode = None if name_mode == "bf16" else name_mode
            src = RandomBf16(hf_shapes(cfg))
            w = load_weights(src, config, gp.bfloat16, dev, where="random", quantize=mode)
            m = CausalTransformerModel(config, w, gp.bfloat16, dev, source=name)
            toks: dict[str, Any] = {}
            repeated = len(set(variants)) < len(variants)
            for i, variant in enumerate(variants if mode is not None else ["default"]):
                (native_gemv.PDL_LAUNCH, ops_gemv.QUANT_GATED_GEMV), suffix = VARIANTS[variant]
                key = name_mode + suffix
                key += f", round {i // len(set(variants)) + 1}" if repeated and mode else ""
                m.drop_step_graphs()  # captured with the other launch
                toks[key] = m.generate(
                    prompt, 16, temperature=0, stop_token_ids=()
                )  # compile, capture
                rates = []
                for _ in range(3):
                    st = GenerationStats()
                    m.generate(prompt, new, temperature=0, stop_token_ids=(), stats=st)
                    rates.append(st.decode_tokens_per_s)
                res[key] = {"weight_bytes": w.nbytes(), "decode_tok_s": sorted(rates)[1]}
                if i == 0:
                    pre = []
                    for _ in range(3):
                        sp = GenerationStats()
                        m.generate(long_prompt, 1, temperature=0, stop_token_ids=(), stats=sp)
                        pre.append(sp.prefill_tokens_per_s)
                    res[key]["prefill_tok_s"] = sorted(pre)[1]
                same = len({str(t) for t in toks.values()}) == 1
                print(f"{name} x{layers} {key}: weights {w.nbytes() / 2**20:.1f} MiB, decode "
                      f"{sorted(rates)[1]:.0f} tok/s ({st.decode_mode}), prefill 1024 tokens "
                      f"{res[key].get('prefill_tok_s', float('nan')):.0f} tok/s, tokens as the "
                      f"first launch: {same}", flush=True)  # fmt: skip
            del m, w
    finally:  # the shipped switches, whatever happened
        native_gemv.PDL_LAUNCH, ops_gemv.QUANT_GATED_GEMV = VARIANTS["default"][0]
    return res


def moe_experts(
    timer: DeviceTimer, fmt: str, copy_gbs: float, tokens: list[int]
) -> list[dict[str, Any]]:
    """One Mixtral-8x7B layer's expert MLP (gated gate/up, then down with the routing weight)
    with the experts in ``fmt`` (random blocks) against the same layer's dense bf16 experts."""
    from pygpukit.models.moe import block_rows

    h, inter, e, k = 4096, 14336, 8, 2
    qs = [random_weight(fmt, e * n, kk, seed=i) for i, (n, kk) in
          enumerate(((inter, h), (inter, h), (h, inter)))]  # fmt: skip
    for q in qs:
        q.experts = e
    # Dense peers with random values (all-zero weights can run the tensor cores cooler).
    dense = [gp.dequantize_gguf(q, dtype="bfloat16").reshape(e, -1, q.shape[1]) for q in qs]
    out = []
    for tok in tokens:
        rng = np.random.default_rng(tok)
        x = gp.from_numpy(rng.standard_normal((tok, h)).astype(np.float32), device="cuda:0")
        x = x.astype("bfloat16")
        pick = np.stack([rng.permutation(e)[:k] for _ in range(tok)]).astype(np.int32)
        ids = gp.from_numpy(pick, device="cuda:0")
        wts = gp.from_numpy(np.full((tok * k,), 0.5, np.float32), device="cuda:0")
        rows, be = gp.moe_align(ids, e, block_rows(tok * k, e))

        def mlp(w: list[Any], x: Any = x, rows: Any = rows, be: Any = be, wts: Any = wts) -> Any:
            a = gp.moe_linear(x, w[0], rows, be, k, w_up=w[1])
            return gp.moe_linear(a, w[2], rows, be, 1, row_scale=wts)

        def expanded(x: Any = x) -> Any:  # the experts dequantized for the call, then dense
            return mlp([gp.dequantize_gguf(q, dtype=x.dtype).reshape(e, -1, q.shape[1])
                        for q in qs])  # fmt: skip

        tq = timer.median_seconds(lambda: mlp(qs), rounds=10)
        td = timer.median_seconds(lambda: mlp(dense), rounds=10)
        te = timer.median_seconds(expanded, rounds=5)
        hit = len(set(pick.reshape(-1).tolist()))
        qbytes = hit * sum(q.nbytes for q in qs) / e
        row = {"tokens": tok, "quantized_us": tq * 1e6, "dense_bf16_us": td * 1e6,
               "dequantize_then_dense_us": te * 1e6, "expert_bytes": qbytes,
               "bw_frac": qbytes / tq / (copy_gbs * 1e9)}  # fmt: skip
        out.append(row)
        print(f"mixtral layer {fmt} experts, {tok} tokens: {tq * 1e6:.1f} us "
              f"({100 * row['bw_frac']:.0f}% bw of {qbytes / 2**20:.0f} MiB), dense bf16 "
              f"{td * 1e6:.1f} us, {td / tq:.2f}x; dequantize + dense {te * 1e6:.1f} us",
              flush=True)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--formats", nargs="+", default=["q4_0", "q4_1", "q8_0", "q4_k", "q5_k", "q6_k"])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 16, 64, 512, 4096])
    p.add_argument("--model", default=None)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--at-load", default=None, help="a benchmarks/_models.py config name")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument(
        "--at-load-modes",
        nargs="+",
        default=["bf16", "fp8", "int4", "nvfp4", "w8a8"],
        choices=["bf16", "fp8", "int4", "nvfp4", "w8a8"],
    )
    p.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=list(VARIANTS),
        help="--at-load: each quantized mode with each of these, in turn (default: default)",
    )
    p.add_argument(
        "--gemv-pdl",
        nargs="+",
        default=None,
        choices=["on", "off"],
        help="--at-load: the native GEMV's early launch, each in turn (on = --variants default, "
        "off = gemv-pdl-off)",
    )
    p.add_argument("--moe", default=None, help="time a Mixtral layer's experts in this format")
    p.add_argument("--moe-tokens", type=int, nargs="+", default=[1, 16, 256])
    p.add_argument("--skip-products", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    for f in args.formats:
        if f not in GGUF_BLOCKS:
            p.error(f"--formats: {f!r} is not one of {tuple(GGUF_BLOCKS)}")
    if args.variants is not None and args.gemv_pdl is not None:
        p.error("--variants and --gemv-pdl: give one of them")
    variants = args.variants or [
        "default" if v == "on" else "gemv-pdl-off" for v in (args.gemv_pdl or ["on"])
    ]
    timer = DeviceTimer(0)
    copy_gbs = timer.copy_rate()
    print(f"device copy {copy_gbs:.0f} GB/s (read + write)", flush=True)
    res: dict[str, Any] = {"copy_gbs": copy_gbs}
    if args.sweep:
        res["sweep"] = sweep(timer, args.formats, copy_gbs)
    if not args.skip_products:
        res["products"] = products(timer, args.formats, args.rows, copy_gbs)
    if args.model:
        res["model"] = model(args.model, args.new)
    if args.at_load:
        res["at_load"] = at_load(args.at_load, args.layers, args.new, args.at_load_modes, variants)
    if args.moe:
        res["moe"] = moe_experts(timer, args.moe, copy_gbs, args.moe_tokens)
    text = json.dumps(res, default=str)
    if args.json:
        Path(args.json).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
