"""Sweep the attention kernel's launch configurations on the GPU, next to torch's flash SDPA.

    python benchmarks/tuning/tune_attention.py               # the target shapes, causal, bf16
    python benchmarks/tuning/tune_attention.py --shapes all  # + D80, D96, D256 (their CONFIGS rows)
    python benchmarks/tuning/tune_attention.py --mask both   # non-causal rows too
    python benchmarks/tuning/tune_attention.py --quick       # a dozen candidates per shape
    python benchmarks/tuning/tune_attention.py --config 128,64,8,3,desc --config 64,64,4,3,ptr
    options: --layout bshd (token-major memory as [B, H, S, D] views), --dtype float16,
             --jobs N (parallel compiles), --reps N, --ws (add warp_specialize variants),
             --json FILE (every row)

Per shape: torch F.scaled_dot_product_attention with the flash backend forced (the target's peer)
and, for context, torch's default dispatch and cuDNN, all timed in the same run on the same stream
as pygpukit; then every candidate AttnConfig of pygpukit.backends.triton_kernels.attention, first
checked against torch's float32 math on the same inputs (error = max |out - ref| / max |ref|, within
1e-2 for bf16 and 2e-3 for fp16, the design bounds; NaN fails), then timed (CUDA events around each
call, L2 flushed before it, median of --reps after warm-up). The best head-section sizes of the top
configs are tried next. Candidates compile first in --jobs processes (they fill Triton's on-disk
cache; the timed process then loads them). Prints a table per shape sorted by TFLOP/s and, last, the
CONFIGS entries to paste into the module.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pygpukit as gp
from pygpukit import runtime
from pygpukit.backends.triton_kernels import attention as attn
from pygpukit.backends.triton_kernels.attention import AttnConfig
from pygpukit.benchmark.timing import DeviceTimer

TARGETS = [(1, 32, 4096, 128), (4, 16, 4096, 64)]
OTHER_DIMS = [(2, 32, 4096, 80), (2, 32, 4096, 96), (1, 16, 4096, 256)]
SMEM_LIMIT = 232448  # bytes of shared memory one block may use on Hopper (227 KiB)
BOUND = {"bfloat16": 1e-2, "float16": 2e-3}
QUICK = [
    AttnConfig(128, 64, 8, 3),
    AttnConfig(128, 64, 8, 3, "desc"),
    AttnConfig(128, 128, 8, 2),
    AttnConfig(128, 128, 8, 2, "desc"),
    AttnConfig(128, 128, 8, 3, "desc"),
    AttnConfig(128, 64, 4, 3, "desc"),
    AttnConfig(128, 32, 4, 3),
    AttnConfig(64, 64, 4, 3),
    AttnConfig(64, 64, 4, 3, "desc"),
    AttnConfig(64, 128, 4, 2, "desc"),
    AttnConfig(64, 128, 8, 2, "desc"),
    AttnConfig(64, 32, 4, 4),
]

Shape = tuple[int, int, int, int]


def smem_bytes(cfg: AttnConfig, d: int, es: int = 2) -> int:
    """Shared memory of one program: the q tile plus num_stages K and V tiles."""
    bd = max(16, 1 << (d - 1).bit_length())
    return es * (cfg.block_m * bd + cfg.num_stages * cfg.block_n * 2 * bd)


def candidates(d: int, quick: bool, ws: bool) -> list[AttnConfig]:
    if quick and d <= 128:
        base = QUICK
    elif quick:  # D256: 64-row tiles only (a 128 x 256 fp32 accumulator does not fit)
        grid = itertools.product((32, 64), (4, 8), (2, 3), ("ptr", "desc"))
        base = [AttnConfig(64, bn, w, s, ld) for bn, w, s, ld in grid]
    else:
        base = [
            AttnConfig(bm, bn, w, s, ld)
            for bm, bn, w, s, ld in itertools.product(
                (64, 128), (32, 64, 128), (4, 8), (2, 3, 4), ("ptr", "desc")
            )
        ]
    out = [c for c in base if smem_bytes(c, d) <= SMEM_LIMIT]
    if ws:
        out += [
            AttnConfig(c.block_m, c.block_n, c.num_warps, c.num_stages, c.loads, True)
            for c in out
            if c.loads == "desc"
        ]
    return out


def parse_config(text: str) -> AttnConfig:
    parts = text.split(",")
    nums = [int(p) for p in parts[:4]]
    loads = parts[4] if len(parts) > 4 else "ptr"
    ws = len(parts) > 5 and parts[5] in ("1", "ws", "true")
    return AttnConfig(nums[0], nums[1], nums[2], nums[3], loads, ws)


def flops(shape: Shape, causal: bool) -> int:
    b, h, s, d = shape
    return (2 if causal else 4) * b * h * s * s * d


# ----- parallel compiles ------------------------------------------------------------------------


def _compile_worker(jobs: list[tuple[Shape, bool, str, str, dict[str, Any]]]) -> list[str]:
    """Run each (shape, causal, dtype, layout, config) once on empty inputs: compiles it into
    Triton's cache. Returns error lines (compile failures are reported again when timed)."""
    errors = []
    for shape, causal, dtype, layout, cfgd in jobs:
        cfg = AttnConfig(**cfgd)
        try:
            q, k, v, o = _gp_inputs(shape, dtype, layout)
            attn._sdpa(q, k, v, causal=causal, scale=None, out=o, config=cfg)
            gp.synchronize()
        except Exception as exc:  # reported, the sweep goes on
            errors.append(f"{cfg}: {type(exc).__name__}: {str(exc)[:200]}")
    return errors


def _gp_inputs(shape: Shape, dtype: str, layout: str) -> tuple[gp.GPUArray, ...]:
    b, h, s, d = shape
    if layout == "bshd":
        return tuple(
            gp.empty((b, s, h, d), dtype, device="cuda:0").transpose(0, 2, 1, 3) for _ in range(4)
        )
    return tuple(gp.empty((b, h, s, d), dtype, device="cuda:0") for _ in range(4))


def precompile(work: list[tuple[Shape, bool, str, str, AttnConfig]], jobs: int) -> None:
    if jobs <= 1 or not work:
        return
    items = [(shape, causal, dt, lay, asdict(c)) for shape, causal, dt, lay, c in work]
    chunks = [items[i::jobs] for i in range(jobs)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(jobs) as pool:
        for errs in pool.map(_compile_worker, chunks):
            for e in errs:
                print(f"  compile: {e}", file=sys.stderr)


# ----- timing -----------------------------------------------------------------------------------


# Times fn: median device milliseconds over the sweep's reps (pygpukit.benchmark.timing).
Timer = Callable[[Callable[[], Any]], float]


def torch_inputs(torch: Any, shape: Shape, dtype: str, layout: str) -> tuple[Any, ...]:
    b, h, s, d = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    tdt = getattr(torch, dtype)
    if layout == "bshd":
        mk = lambda: torch.randn(b, s, h, d, device="cuda", dtype=tdt, generator=g).transpose(1, 2)  # noqa: E731
    else:
        mk = lambda: torch.randn(b, h, s, d, device="cuda", dtype=tdt, generator=g)  # noqa: E731
    return mk(), mk(), mk()


def torch_peers(torch: Any, q: Any, k: Any, v: Any, causal: bool, timer: Timer) -> dict[str, float]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    f = torch.nn.functional.scaled_dot_product_attention
    res: dict[str, float] = {}
    backends = [
        ("flash", SDPBackend.FLASH_ATTENTION),
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("default", None),
    ]
    for name, backend in backends:
        try:
            if backend is None:
                res[name] = timer(lambda: f(q, k, v, is_causal=causal))
            else:
                with sdpa_kernel(backend):
                    res[name] = timer(lambda: f(q, k, v, is_causal=causal))
        except Exception as exc:
            print(f"  torch {name}: unavailable ({type(exc).__name__}: {str(exc)[:120]})")
    return res


def sweep_shape(
    torch: Any,
    shape: Shape,
    causal: bool,
    dtype: str,
    layout: str,
    cfgs: list[AttnConfig],
    timer: Timer,
    sections: bool,
) -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = shape
    label = f"B{b} H{h} S{s} D{d} {'causal' if causal else 'full'} {dtype} {layout}"
    print(f"\n== {label}")
    q, k, v = torch_inputs(torch, shape, dtype, layout)
    with sdpa_kernel(SDPBackend.MATH):  # the reference: torch's math path in float32
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=causal
        )
    ref_max = float(ref.abs().max())
    peers = torch_peers(torch, q, k, v, causal, timer)
    fl = flops(shape, causal)
    for name, ms in peers.items():
        print(f"  torch {name:<8} {ms:8.3f} ms {fl / ms / 1e9:7.1f} TFLOP/s")
    base = peers.get("flash") or min(peers.values(), default=float("nan"))
    gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
    out_t = torch.empty_like(q)
    out = gp.from_dlpack(out_t)
    rows: list[dict[str, Any]] = []

    def measure(cfg: AttnConfig) -> dict[str, Any]:
        row: dict[str, Any] = {"shape": label, "config": asdict(cfg), "causal": causal}
        try:
            out_t.fill_(float("nan"))
            attn._sdpa(gq, gk, gv, causal=causal, scale=None, out=out, config=cfg)
            err = float((out_t.float() - ref).abs().max()) / ref_max
            row["error"] = err
            if not err <= BOUND[dtype]:  # NaN fails too
                row["status"] = f"WRONG (error {err:.2e})"
                return row
            ms = timer(
                lambda: attn._sdpa(gq, gk, gv, causal=causal, scale=None, out=out, config=cfg)
            )
            row.update(ms=ms, tflops=fl / ms / 1e9, vs_flash=base / ms, status="ok")
        except Exception as exc:
            row["status"] = f"FAILED {type(exc).__name__}: {str(exc)[:100]}"
        return row

    for cfg in cfgs:
        rows.append(measure(cfg))
    ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: -r["tflops"])
    if sections and ok:
        nbh = b * h
        for r in ok[:3]:
            c = AttnConfig(**r["config"])
            for sec in sorted({1, 4, 8, 16, nbh}):
                rows.append(
                    measure(
                        AttnConfig(
                            c.block_m,
                            c.block_n,
                            c.num_warps,
                            c.num_stages,
                            c.loads,
                            c.warp_specialize,
                            sec,
                        )
                    )
                )
    ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: -r["tflops"])
    print(
        f"  {'config (bm, bn, warps, stages, loads, ws, section)':<52} {'ms':>8} "
        f"{'TFLOP/s':>8} {'vs flash':>8} {'error':>9}"
    )
    for r in ok + [r for r in rows if r["status"] != "ok"]:
        c = r["config"]
        name = (
            f"({c['block_m']}, {c['block_n']}, {c['num_warps']}, {c['num_stages']}, "
            f"{c['loads']}, {int(c['warp_specialize'])}, {c['head_section']})"
        )
        if r["status"] == "ok":
            print(
                f"  {name:<52} {r['ms']:8.3f} {r['tflops']:8.1f} {r['vs_flash']:7.2f}x "
                f"{r['error']:9.2e}"
            )
        else:
            print(f"  {name:<52} {r['status']}")
    for r in rows:
        r["torch_ms"] = peers
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shapes", choices=("target", "dims", "all"), default="target")
    ap.add_argument("--mask", choices=("causal", "full", "both"), default="causal")
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    ap.add_argument("--layout", choices=("bhsd", "bshd"), default="bhsd")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ws", action="store_true")
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-sections", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    if not gp.is_cuda_available():
        sys.exit("tune_attention.py needs a CUDA device")
    shapes = {"target": TARGETS, "dims": OTHER_DIMS, "all": TARGETS + OTHER_DIMS}[args.shapes]
    masks = {"causal": [True], "full": [False], "both": [True, False]}[args.mask]
    plan = []
    for shape in shapes:
        cfgs = (
            [parse_config(c) for c in args.config]
            if args.config
            else candidates(shape[3], args.quick, args.ws)
        )
        for causal in masks:
            plan.append((shape, causal, cfgs))
    work = [(sh, ca, args.dtype, args.layout, c) for sh, ca, cfgs in plan for c in cfgs]
    print(f"{len(work)} kernel variants; compiling in {args.jobs} processes", flush=True)
    precompile(work, args.jobs)

    device_timer = DeviceTimer(0)  # one stream for pygpukit and torch, the L2 flush, events
    reps = args.reps

    def timer(fn: Callable[[], Any]) -> float:
        return device_timer.median_seconds(fn, rounds=reps) * 1e3

    props = runtime.device("cuda:0").properties
    print(f"device: {props.get('name', '?')}, torch {torch.__version__}")
    all_rows: list[dict[str, Any]] = []
    best: list[tuple[Shape, bool, dict[str, Any]]] = []
    for shape, causal, cfgs in plan:
        rows = sweep_shape(
            torch, shape, causal, args.dtype, args.layout, cfgs, timer, not args.no_sections
        )
        all_rows.extend(rows)
        ok = [r for r in rows if r["status"] == "ok"]
        if ok:
            best.append((shape, causal, max(ok, key=lambda r: r["tflops"])))
    print("\nBest per shape, as CONFIGS entries (pygpukit/backends/triton_kernels/attention.py;")
    print("D80 and D96 share the BLOCK_D 128 entry with D128, so the D128 row decides it):")
    for shape, causal, r in best:
        c = r["config"]
        extra = ""
        if c["loads"] != "ptr" or c["warp_specialize"] or c["head_section"]:
            extra = f', "{c["loads"]}"'
            if c["warp_specialize"] or c["head_section"]:
                extra += f", {c['warp_specialize']}, {c['head_section']}"
        b, h, s, d = shape
        bd = max(64, 1 << (d - 1).bit_length())
        print(
            f"    ({bd}, 16, {causal}): AttnConfig({c['block_m']}, {c['block_n']}, "
            f"{c['num_warps']}, {c['num_stages']}{extra}),  # B{b} H{h} S{s} D{d}: "
            f"{r['tflops']:.0f} TFLOP/s, {r['vs_flash']:.2f}x torch flash"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)


if __name__ == "__main__":
    main()
