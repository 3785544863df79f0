"""Co-location: a Guaranteed decode beside a BestEffort job on one GPU, every row in one run
with the same weights.

    python benchmarks/colocation.py [--out DIR] [--tokens 512] [--shares 0.25,0.5] [--paces ...]

The interactive job is batch-1 greedy decode of a Llama-3.2-1B-shape model (random bf16
weights, decode steps replayed from a CUDA graph, 16-token prompt). The BestEffort job runs in a
thread beside it, keeping 4 launches in flight: (a) a loop of bf16 8192^3 matmuls, (b) a
bandwidth-bound loop of 1 GiB bf16 adds (c = a + b: 3 GiB moved each).

Rows:
- solo: each job alone (plain contexts), and the decode alone in a Guaranteed context with an SM
  share (what green contexts cost in solo speed).
- none: no scheduler: two plain gp.Contexts, the decode's stream at the device's highest
  priority and the BestEffort job's at its lowest.
- sched reserve S: pygpukit.scheduler, the decode in a Guaranteed context with sm_share S (SMs
  reserved for it), the BestEffort job in a best_effort context on the remaining SMs, paced to
  P of the GPU's time while the decode is active.
- sched cap C: the decode in a Guaranteed context on every SM, the BestEffort job capped to
  sm_share C of the SMs, paced to P.
- torch: HF transformers' decode of the same weights on a high-priority torch stream, the
  BestEffort job in torch on a low-priority stream; and the same with torch green contexts
  (torch.cuda.green_contexts), the decode on the same SM count S as pygpukit's best row.

Decode: tokens/s over the decode steps and the p50/p99 of the time between tokens. BestEffort:
completed operations per second over the decode's window. Ratios are against the solo rows of the
same run. Also measured: the host cost of one launch on a plain stream, in a Guaranteed context
(green stream, activity stamp) and in a paced context while nothing is Guaranteed-active.
Writes colocation.json and colocation.md under --out and prints the table last.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pygpukit as gp
from benchmarks._models import hf_and_pygpukit
from pygpukit import scheduler as sched
from pygpukit.models.generation import stream as gen_stream
from pygpukit.models.sampling import SamplingParams

PROMPT = list(range(100, 116))
DEPTH = 4  # BestEffort launches kept in flight


# ----- the BestEffort jobs ----------------------------------------------------------------------


class Loop(threading.Thread):
    """Launch ``op()`` repeatedly, keeping DEPTH launches in flight; record (time, completed)."""

    def __init__(self, setup: Callable[[], Any], op: Callable[[], Any], event: Callable[[], Any]):
        super().__init__(daemon=True)
        self.setup, self.op, self.event = setup, op, event
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.marks: list[tuple[float, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.setup():
                ring: collections.deque[Any] = collections.deque()
                done = 0
                for _ in range(3):  # warm-up: compile, plans
                    self.op()
                self.event().synchronize()
                self.ready.set()
                self.marks.append((time.perf_counter(), 0))
                while not self.stop.is_set():
                    self.op()
                    ring.append(self.event())
                    if len(ring) > DEPTH:
                        ring.popleft().synchronize()
                        done += 1
                        self.marks.append((time.perf_counter(), done))
                while ring:
                    ring.popleft().synchronize()
        except BaseException as e:  # reported by the caller
            self.error = e
            self.ready.set()

    def rate(self, t0: float, t1: float) -> float:
        """Completed operations per second between t0 and t1 (interpolated)."""
        ts = np.array([m[0] for m in self.marks])
        ns = np.array([m[1] for m in self.marks], dtype=np.float64)
        if len(ts) < 2 or t1 <= t0:
            return 0.0
        return float((np.interp(t1, ts, ns) - np.interp(t0, ts, ns)) / (t1 - t0))


def gp_job(kind: str, session: Callable[[], Any]) -> Loop:
    state: dict[str, Any] = {}

    def setup() -> Any:
        cm = session()
        ctx = cm.__enter__()
        if kind == "matmul":
            n = 8192
            rng = np.random.default_rng(1)
            state["a"] = gp.from_numpy(rng.standard_normal((n, n), np.float32)).astype(gp.bfloat16)
            state["b"] = gp.from_numpy(rng.standard_normal((n, n), np.float32)).astype(gp.bfloat16)
            state["c"] = gp.empty((n, n), gp.bfloat16)
        else:
            n = 1 << 29  # 1 GiB of bf16
            state["a"] = gp.full((n,), 1.0, gp.bfloat16)
            state["b"] = gp.full((n,), 2.0, gp.bfloat16)
            state["c"] = gp.empty((n,), gp.bfloat16)
        state["cm"] = cm
        return _Exit(cm, ctx)

    def op() -> None:
        if kind == "matmul":
            gp.matmul(state["a"], state["b"], out=state["c"])
        else:
            gp.add(state["a"], state["b"], out=state["c"])

    def event() -> Any:
        return gp.current_stream().record_event(gp.Event(device=0, enable_timing=False))

    return Loop(setup, op, event)


class _Exit:
    def __init__(self, cm: Any, ctx: Any) -> None:
        self.cm, self.ctx = cm, ctx

    def __enter__(self) -> Any:
        return self.ctx

    def __exit__(self, *exc: object) -> None:
        self.cm.__exit__(*exc)


def torch_job(kind: str, stream: Any) -> Loop:
    import torch

    state: dict[str, Any] = {}

    class Setup:
        def __enter__(self) -> None:
            self.cm = torch.cuda.stream(stream)
            self.cm.__enter__()
            if kind == "matmul":
                n = 8192
                state["a"] = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
                state["b"] = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
                state["c"] = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
            else:
                n = 1 << 29
                state["a"] = torch.full((n,), 1.0, device="cuda", dtype=torch.bfloat16)
                state["b"] = torch.full((n,), 2.0, device="cuda", dtype=torch.bfloat16)
                state["c"] = torch.empty(n, device="cuda", dtype=torch.bfloat16)

        def __exit__(self, *exc: object) -> None:
            self.cm.__exit__(*exc)

    def op() -> None:
        if kind == "matmul":
            torch.matmul(state["a"], state["b"], out=state["c"])
        else:
            torch.add(state["a"], state["b"], out=state["c"])

    def event() -> Any:
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    return Loop(Setup, op, event)


# ----- the decode -------------------------------------------------------------------------------


def decode(model: Any, new: int) -> dict[str, Any]:
    """Greedy decode of ``new`` tokens with CUDA-graph steps; tok/s, inter-token times, tokens."""
    stamps = []
    tokens = []
    params = SamplingParams(temperature=0.0)
    for t in gen_stream(model, PROMPT, new, params, stop_ids=(), graph=True):
        stamps.append(time.perf_counter())
        tokens.append(t)
    gaps = np.diff(stamps)  # the first token comes from the prefill
    return {
        "tok_s": float(len(gaps) / (stamps[-1] - stamps[0])),
        "p50_ms": float(np.percentile(gaps, 50) * 1e3),
        "p99_ms": float(np.percentile(gaps, 99) * 1e3),
        "t0": stamps[0],
        "t1": stamps[-1],
        "tokens": tokens,
    }


def hf_decode(hf: Any, new: int, stream: Any) -> dict[str, float]:
    import torch
    from transformers.generation.streamers import BaseStreamer

    stamps: list[float] = []

    class Stamp(BaseStreamer):
        def put(self, value: Any) -> None:
            stamps.append(time.perf_counter())

        def end(self) -> None:
            pass

    ids = torch.tensor([PROMPT], device="cuda")
    with torch.cuda.stream(stream), torch.no_grad():
        hf.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            streamer=Stamp(),
        )
    stamps = stamps[1:]  # the first put() is the prompt
    gaps = np.diff(stamps)
    return {
        "tok_s": float(len(gaps) / (stamps[-1] - stamps[0])),
        "p50_ms": float(np.percentile(gaps, 50) * 1e3),
        "p99_ms": float(np.percentile(gaps, 99) * 1e3),
        "t0": stamps[0],
        "t1": stamps[-1],
    }


def beside(run_decode: Callable[[], dict[str, float]], job: Loop | None) -> dict[str, Any]:
    """Run the decode (once to warm up in this arrangement, then measured) beside ``job``."""
    if job is not None:
        job.start()
        job.ready.wait()
        if job.error is not None:
            raise job.error
    try:
        run_decode()  # warm-up: captures the step graph where this arrangement runs it
        d = run_decode()
    finally:
        if job is not None:
            job.stop.set()
            job.join()
    if job is not None:
        if job.error is not None:
            raise job.error
        d["be_rate"] = job.rate(d["t0"], d["t1"])
    return d


# ----- the scenarios ----------------------------------------------------------------------------


def launch_cost(n: int = 1000, rounds: int = 7) -> dict[str, float]:
    """Host microseconds per launch of a small op (median of interleaved rounds): plain stream,
    Guaranteed context (green stream + activity stamp), paced BestEffort context while no
    Guaranteed context is active (the gate's check only)."""
    s = sched.initialize(0)
    g = s.create_context("probe-g", max_vram=1 << 28, sm_share=0.5)
    b = s.create_context("probe-be", qos="best_effort")
    s.active_window_ms = 0.0  # the Guaranteed context is never "active": b is never paced
    x = gp.ones((256,), gp.float32)
    arms = {
        "plain_us": gp.Context("probe-plain"),
        "guaranteed_green_us": sched.context_session(g),
        "best_effort_gate_us": sched.context_session(b),
    }
    times: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(rounds):
        for key, cm in arms.items():
            with cm:
                y = gp.empty((256,), gp.float32)
                for _ in range(50):
                    gp.add(x, x, out=y)
                gp.synchronize()
                t0 = time.perf_counter()
                for _ in range(n):
                    gp.add(x, x, out=y)
                t1 = time.perf_counter()
                gp.synchronize()
            times[key].append((t1 - t0) / n * 1e6)
    s.shutdown()
    return {k: float(np.median(v)) for k, v in times.items()}


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    rows: list[dict[str, Any]] = []
    info: dict[str, Any] = {
        "device": gp.get_device_properties()["name"],
        "sm_count": gp.get_device_properties()["sm_count"],
        "tokens": args.tokens,
        "date": time.strftime("%Y-%m-%d"),
    }
    hf, model = hf_and_pygpukit("llama-3.2-1b")
    new = args.tokens
    lo, hi = gp.Stream.priority_range(0)
    jobs = args.jobs.split(",")

    def plain_session(priority: int) -> Callable[[], Any]:
        ctx = gp.Context(f"plain{priority}", priority=priority)
        return lambda: ctx

    def run_plain_decode(ctx: Any) -> Callable[[], dict[str, float]]:
        def f() -> dict[str, Any]:
            with ctx:  # the step graph is recorded again where ctx's stream runs
                return decode(model, new)

        return f

    # Solo rows.
    solo = beside(run_plain_decode(gp.Context("solo", priority=hi)), None)
    rows.append({"row": "solo decode", **solo})
    be_solo: dict[str, float] = {}
    for kind in jobs:
        job = gp_job(kind, plain_session(lo))
        job.start()
        job.ready.wait()
        t0 = time.perf_counter()
        time.sleep(args.be_seconds)
        t1 = time.perf_counter()
        job.stop.set()
        job.join()
        if job.error:
            raise job.error
        be_solo[kind] = job.rate(t0, t1)
        rows.append({"row": f"solo {kind}", "be_rate": be_solo[kind]})
    info["launch_cost"] = launch_cost()

    # No scheduler: plain contexts with stream priorities.
    for kind in jobs:
        d = beside(
            run_plain_decode(gp.Context("dec", priority=hi)), gp_job(kind, plain_session(lo))
        )
        rows.append({"row": f"none + {kind}", "job": kind, **d})

    # The scheduler: the decode's SMs reserved (BE on the rest), or the BE's SMs capped (the
    # decode on every SM).
    arrangements = [("reserve", x) for x in args.shares] + [("cap", x) for x in args.caps]
    for mode, share in arrangements:
        s = sched.initialize(0)
        g = s.create_context(
            "decode", max_vram=2 << 30, sm_share=share if mode == "reserve" else None
        )
        solo_g = beside(run_plain_decode(sched.context_session(g)), None)
        rows.append(
            {"row": f"solo decode, guaranteed, {mode} {share}", "sms": g.sm_count, **solo_g}
        )
        for pace in args.paces:
            for kind in jobs:
                be = s.create_context(
                    "batch",
                    qos="best_effort",
                    pace=pace,
                    sm_share=share if mode == "cap" else None,
                )
                d = beside(
                    run_plain_decode(sched.context_session(g)),
                    gp_job(kind, lambda be=be: sched.context_session(be)),
                )
                d.update(
                    row=f"sched {mode} {share} P={pace} + {kind}",
                    job=kind,
                    sms=g.sm_count,
                    be_sms=be.sm_count,
                    pace=pace,
                    share=share,
                    mode=mode,
                    be_pacing=be.pacing_stats(),
                )
                rows.append(d)
                be.close()
        s.shutdown()

    # torch: two prioritized streams, then green contexts.
    t_hi = torch.cuda.Stream(priority=-5)
    t_lo = torch.cuda.Stream(priority=0)
    hf_solo = beside(lambda: hf_decode(hf, args.hf_tokens, t_hi), None)
    rows.append({"row": "torch solo HF decode", **hf_solo})
    for kind in jobs:
        d = beside(lambda: hf_decode(hf, args.hf_tokens, t_hi), torch_job(kind, t_lo))
        rows.append({"row": f"torch priorities + {kind}", "job": kind, **d})
    try:
        from torch.cuda import green_contexts as tgc

        sm = int(args.torch_green_sms)
        total = int(info["sm_count"])
        gdec = tgc.GreenContext.create(num_sms=sm, device_id=0)
        gbe = tgc.GreenContext.create(num_sms=(total - sm) // 8 * 8, device_id=0)
        s_dec, s_be = _green_stream(gdec), _green_stream(gbe)
        for kind in jobs:
            d = beside(lambda: hf_decode(hf, args.hf_tokens, s_dec), torch_job(kind, s_be))
            rows.append({"row": f"torch green {sm} SMs + {kind}", "job": kind, **d})
    except Exception as e:  # torch without green contexts, or a driver without them
        info["torch_green"] = f"not run: {e!r}"

    ref_tokens = solo["tokens"]
    for r in rows:
        toks = r.pop("tokens", None)
        if toks is not None:
            # Greedy tokens must not depend on where the decode ran (SMs, streams, pacing).
            r["same_tokens"] = toks == ref_tokens
        if r["row"].startswith("torch") and "tok_s" in r:
            r["decode_ratio"] = r["tok_s"] / hf_solo["tok_s"]
            r["p99_ratio"] = r["p99_ms"] / hf_solo["p99_ms"]
        elif "tok_s" in r:
            r["decode_ratio"] = r["tok_s"] / solo["tok_s"]
            r["p99_ratio"] = r["p99_ms"] / solo["p99_ms"]
        if "job" in r and "be_rate" in r:
            r["be_ratio"] = r["be_rate"] / be_solo[r["job"]] if be_solo.get(r["job"]) else None
    return {"info": info, "rows": rows}


def _green_stream(gc: Any) -> Any:
    import torch

    if hasattr(gc, "Stream"):
        return gc.Stream()
    gc.set_context()
    try:
        return torch.cuda.Stream()
    finally:
        gc.pop_context()


def table(res: dict[str, Any]) -> str:
    lines = [
        "| row | SMs (decode/BE) | decode tok/s | vs solo | p50 ms | p99 ms | p99 vs solo "
        "| BE ops/s | BE vs solo |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def f(v: Any, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    for r in res["rows"]:
        if r.get("same_tokens") is False:
            r["row"] += " (TOKENS DIFFER)"
        sms = ""
        if "sms" in r:
            sms = f"{r.get('sms')}/{r.get('be_sms', '')}"
        lines.append(
            f"| {r['row']} | {sms} | {f(r.get('tok_s'), '.1f')} "
            f"| {f(r.get('decode_ratio'), '.2f')} "
            f"| {f(r.get('p50_ms'), '.2f')} | {f(r.get('p99_ms'), '.2f')} "
            f"| {f(r.get('p99_ratio'), '.2f')} | {f(r.get('be_rate'), '.1f')} "
            f"| {f(r.get('be_ratio'), '.2f')} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--hf-tokens", type=int, default=64)
    p.add_argument("--be-seconds", type=float, default=2.0)
    p.add_argument("--jobs", default="matmul,add")
    floats = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--shares", type=floats, default=[0.5], help="decode SM reservations")
    p.add_argument("--caps", type=floats, default=[0.5], help="BestEffort SM caps")
    p.add_argument(
        "--paces",
        type=lambda s: [None if x == "none" else float(x) for x in s.split(",")],
        default=[None, 0.5],
    )
    p.add_argument("--torch-green-sms", type=int, default=64)
    args = p.parse_args()
    if not gp.is_cuda_available():
        sys.exit("colocation: needs a CUDA device")
    res = run_all(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "colocation.json"), "w") as fh:
        json.dump(res, fh, indent=1, default=str)
    md = table(res)
    with open(os.path.join(args.out, "colocation.md"), "w") as fh:
        fh.write(md + "\n")
    print(json.dumps(res["info"], default=str))
    print(md)


if __name__ == "__main__":
    main()
