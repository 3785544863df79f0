"""Soak: threads allocating, computing, copying and freeing at random, some calls bad on purpose.

    python benchmarks/soak.py --seconds 60 --threads 8              # on the GPU (cuda:0)
    python benchmarks/soak.py --seconds 2 --threads 2 --device cpu  # the CPU smoke run

Each thread draws actions at random: allocate (random shape and dtype, kept for a while), free,
an op (add, exp, matmul, softmax, rmsnorm), a copy (device, to the host and back), a bad call on
purpose (mismatched shapes, a storage dtype, an out-of-range fill value, a broadcast view as out=)
and an allocation over the VRAM quota of a pygpukit.scheduler context. Afterwards every array is
dropped and the device synchronized; the run passes when the pool counters of the default pool
and of the context are back to zero, every failure was one of the expected pygpukit exceptions,
results checked against NumPy were right, and no thread died. The last line of output is one JSON
object: duration, operations, failures by exception type, unexpected errors, ok.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygpukit as gp
from pygpukit.backends._support import scratch
from pygpukit.scheduler import context_session, create_context, initialize

QUOTA = 64 << 20
DTYPES = ("float32", "float16", "bfloat16", "int32", "uint8")


def _expected(exc: BaseException) -> bool:
    """A pygpukit exception class, or a ValueError/TypeError raised inside pygpukit."""
    if type(exc).__module__.startswith("pygpukit"):
        return True
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return isinstance(exc, (ValueError, TypeError)) and last is not None and "pygpukit" in last


class Worker:
    def __init__(self, seed: int, device: str, ctx: Any, deadline: float) -> None:
        self.rng = random.Random(seed)
        self.device, self.ctx, self.deadline = device, ctx, deadline
        self.live: list[gp.GPUArray] = []
        self.ops: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.unexpected: list[str] = []

    def shape(self) -> tuple[int, ...]:
        dims = [self.rng.choice((1, 3, 7, 64, 129, 1024)) for _ in range(self.rng.randint(1, 3))]
        while np.prod(dims) > 1 << 18:  # at most 1 MiB of float32 an array
            dims[self.rng.randrange(len(dims))] = 7
        return tuple(dims)

    def alloc(self) -> None:
        a = gp.empty(self.shape(), self.rng.choice(DTYPES), self.device)
        a.fill_(1)
        self.live.append(a)
        if len(self.live) > 32:
            self.live.pop(self.rng.randrange(len(self.live)))

    def free(self) -> None:
        if self.live:
            self.live.pop(self.rng.randrange(len(self.live)))

    def op(self) -> None:
        m, k, n = (self.rng.choice((1, 7, 64, 257)) for _ in range(3))
        a = np.random.default_rng(self.rng.randrange(2**32)).standard_normal((m, k), np.float32)
        b = np.random.default_rng(self.rng.randrange(2**32)).standard_normal((k, n), np.float32)
        ga, gb = gp.from_numpy(a, self.device), gp.from_numpy(b, self.device)
        kind = self.rng.choice(("matmul", "add", "exp", "softmax", "rmsnorm"))
        if kind == "matmul":
            got, want = gp.matmul(ga, gb), a.astype(np.float64) @ b
        elif kind == "add":
            got, want = gp.add(ga, ga), 2.0 * a.astype(np.float64)
        elif kind == "exp":
            got, want = gp.exp(ga), np.exp(a.astype(np.float64))
        elif kind == "softmax":
            e = np.exp(a - a.max(-1, keepdims=True))
            got, want = gp.softmax(ga), e / e.sum(-1, keepdims=True)
        else:
            w = np.ones(k, np.float32)
            rms = np.sqrt((a.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
            got, want = gp.rmsnorm(ga, gp.from_numpy(w, self.device), eps=1e-5), a / rms
        err = np.abs(got.to_numpy().astype(np.float64) - want).max()
        if not err <= 1e-3 * max(1.0, float(np.abs(want).max())):  # tf32-free fp32 bound
            raise AssertionError(f"{kind}: max abs error {err}")

    def copy(self) -> None:
        if not self.live:
            return
        a = self.rng.choice(self.live)
        back = gp.from_numpy(a.to_numpy(), self.device)
        c = a.copy()
        if not np.array_equal(c.to_numpy(), back.to_numpy()):
            raise AssertionError("copy differs from the host round trip")

    def bad(self) -> None:
        kind = self.rng.randrange(5)
        if kind == 0:
            gp.matmul(gp.ones((3, 4), device=self.device), gp.ones((5, 6), device=self.device))
        elif kind == 1:
            gp.exp(gp.ones((4,), "float8_e4m3fn", self.device))
        elif kind == 2:
            gp.full((4,), float("nan"), "int32", self.device)
        elif kind == 3:
            gp.exp(
                gp.ones((4, 3), device=self.device),
                out=gp.ones(3, device=self.device).broadcast_to((4, 3)),
            )
        else:
            gp.empty((2**40, 2**40), device=self.device)
        raise AssertionError(f"bad call {kind} did not raise")

    def over_quota(self) -> None:
        with context_session(self.ctx):
            keep = gp.empty((QUOTA // 8,), "float32", self.device)  # half the quota
            gp.empty((QUOTA // 4 + 1,), "float32", self.device)  # with it: over the quota
            del keep
        raise AssertionError("an allocation over the quota succeeded")

    def run(self) -> None:
        actions = [(self.alloc, 4), (self.free, 3), (self.op, 3), (self.copy, 2),
                   (self.bad, 2), (self.over_quota, 1)]  # fmt: skip
        fns, weights = zip(*actions, strict=True)
        while time.perf_counter() < self.deadline:
            fn = self.rng.choices(fns, weights)[0]
            self.ops[fn.__name__] += 1
            try:
                fn()
            except AssertionError as exc:
                self.unexpected.append(f"{fn.__name__}: {exc}")
            except Exception as exc:
                if not _expected(exc) or fn.__name__ not in ("bad", "over_quota"):
                    self.unexpected.append("".join(traceback.format_exception(exc))[-2000:])
                self.failures[type(exc).__name__] += 1
        self.live.clear()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--device", default=None, help="cuda:N or cpu (default: the GPU if present)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    device = args.device or ("cuda:0" if gp.is_cuda_available() else "cpu")
    initialize(device)
    ctx = create_context("soak", max_vram=QUOTA, device=device)
    t0 = time.perf_counter()
    workers = [Worker(args.seed + i, device, ctx, t0 + args.seconds) for i in range(args.threads)]
    threads = [threading.Thread(target=w.run, name=f"soak-{i}") for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    duration = time.perf_counter() - t0
    alive = [t.name for t in threads if t.is_alive()]
    workers_ops = sum((w.ops for w in workers), Counter())
    failures = sum((w.failures for w in workers), Counter())
    unexpected = [u for w in workers for u in w.unexpected]
    del workers
    gc.collect()
    gp.synchronize()
    # The default pool keeps the GPU backends' workspaces by design (cuBLASLt's 32 MiB per
    # stream): what it holds beyond them is a leak.
    kept = scratch.retained_bytes(gp.device(device)) if device != "cpu" else 0
    pools = {"default": gp.memory_stats(device)["current_bytes"] - kept,
             "soak": ctx.memory_stats()["current_bytes"]}  # fmt: skip
    ok = not unexpected and not alive and all(v == 0 for v in pools.values())
    for u in unexpected[:5]:
        print(u, file=sys.stderr)
    print(json.dumps({
        "device": device, "threads": args.threads, "duration_s": round(duration, 2),
        "operations": sum(workers_ops.values()), "by_action": dict(workers_ops),
        "failures_by_type": dict(failures), "unexpected": len(unexpected),
        "pool_current_bytes": pools, "workspace_bytes": kept, "ok": ok,
    }))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
