"""Paged against contiguous decode attention at batch 1, graph-timed (diagnostic, GPU host).

python benchmarks/tuning/diag_paged.py           # block-table order, then the 16-slot page knobs
python benchmarks/tuning/diag_paged.py --native  # the native split-key kernel's knobs vs Triton

Every number is one sdpa_decode call's share of a CUDA graph of n calls over distinct caches (256
MiB in all, as benchmarks/test_attention_decode.py::test_decode_graph), bf16 Hq32 Hkv8 D128, one
query token, batch 1 at 4096 / 16384 / 32768 keys, median of 15 replays (L2 flushed before each).
- Block-table order: the same kernel with the identity table (pages in address order), runs of
  16 consecutive pages in shuffled order, and a random permutation (the benchmark's table). If the
  identity table closed the gap to the contiguous cache, page scatter would be the cause.
- Knob sweep: the module constants of pygpukit/backends/triton_kernels/attention_decode.py that
  serve a 16-slot paged cache at batch 1 (the default class), and the few-programs class forced.
- --native: the stages and blocks per SM of the native split-key kernel
  (pygpukit/backends/native/attention_decode.py), contiguous and 16-slot pages, batch 1
  and 16, against the Triton kernel's contiguous cache of the same run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import pygpukit as gp
from pygpukit.backends.native import attention_decode as nd
from pygpukit.backends.triton_kernels import attention_decode as ad
from pygpukit.benchmark.timing import DeviceTimer

H, HKV, D = 32, 8, 128
CONTEXTS = (4096, 16384, 32768)
ROTATE_BYTES = 256 << 20
KNOBS: dict[str, dict[str, Any]] = {
    "default": {},
    "4 stages": {"NUM_STAGES": 4},
    "1 program per SM": {"PROGRAMS_PER_SM": 1},
    "32-key blocks, 4 stages": {"BLOCK_N": 32, "NUM_STAGES": 4},
    "16-key blocks, 8 stages": {"BLOCK_N": 16, "NUM_STAGES": 8},
    "128-key blocks, 2 stages": {"BLOCK_N": 128, "NUM_STAGES": 2},
    "8 warps": {"NUM_WARPS": 8},
}


def _bf16(shape: tuple[int, ...], seed: int) -> gp.GPUArray:
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return gp.from_numpy(x, device="cuda:0").astype("bfloat16")


def _table(per: int, order: str) -> gp.GPUArray:
    if order == "identity":
        tab = np.arange(per)
    elif order == "runs16":  # runs of 16 consecutive pages, the runs shuffled
        runs = np.random.default_rng(1).permutation(per // 16)
        tab = (runs[:, None] * 16 + np.arange(16)).reshape(-1)
    else:
        tab = np.random.default_rng(1).permutation(per)
    return gp.from_numpy(tab.reshape(1, per).astype(np.int32), device="cuda:0")


def per_call_us(
    timer: DeviceTimer,
    s: int,
    page: int,
    order: str = "random",
    few: bool | None = None,
    *,
    batch: int = 1,
    native: bool = False,
) -> float:
    """One call's share of a graph of n calls over n caches; page 0: the contiguous cache.
    native: the native split-key kernel instead of Triton's."""
    nbytes = 2 * batch * HKV * s * D * 2
    n = max(1, -(-ROTATE_BYTES // nbytes))
    q, out = _bf16((batch, H, 1, D), 2), gp.empty((batch, H, 1, D), "bfloat16", device="cuda:0")
    lens = gp.from_numpy(np.full(batch, s, np.int32), device="cuda:0")
    k1, v1 = _bf16((batch, HKV, s, D), 3), _bf16((batch, HKV, s, D), 4)
    caches = [(k1, v1)] + [(k1.copy(), v1.copy()) for _ in range(n - 1)]
    table = _table(batch * s // page, order).reshape(batch, s // page) if page else None
    calls: list[Callable[[], Any]] = []
    for k, v in caches:
        if page:
            k, v = (c.reshape(batch * s // page, HKV, page, D) for c in (k, v))
        if native:
            calls.append(partial(nd.sdpa_decode, q, k, v, lens, table, out=out))
        else:
            calls.append(partial(ad._sdpa_decode, q, k, v, lens, table, True, None, out, few=few))
    for c in calls:  # compile and size workspaces outside the capture
        c()
    gp.synchronize()
    graph = gp.CUDAGraph(device="cuda:0")
    with graph.capture():
        for c in calls:
            c()
    return timer.median_seconds(graph.replay, rounds=15) / n * 1e6


def _row(name: str, times: list[float], base: list[float] | None = None) -> str:
    cells = []
    for i, t in enumerate(times):
        rel = f" ({100 * (t / base[i] - 1):+.1f}%)" if base else ""
        cells.append(f"{t:7.2f} us{rel}")
    return f"{name:<34} " + "  ".join(cells)


NATIVE_KNOBS: dict[str, dict[str, Any]] = {
    "3 stages, 2 blocks per SM": {"STAGES": 3, "PROGRAMS_PER_SM": 2},
    "3 stages, 1 block per SM": {"STAGES": 3, "PROGRAMS_PER_SM": 1},
    "4 stages, 1 block per SM": {"STAGES": 4, "PROGRAMS_PER_SM": 1},
}


def native_sweep() -> None:
    timer = DeviceTimer(0)
    for batch in (1, 16):
        print(f"batch {batch}, per call at {' / '.join(map(str, CONTEXTS))} keys")
        base = [per_call_us(timer, s, 0, batch=batch) for s in CONTEXTS]
        print(_row("triton contiguous", base))
        print(
            _row(
                "triton paged 16", [per_call_us(timer, s, 16, batch=batch) for s in CONTEXTS], base
            )
        )
        for name, knobs in NATIVE_KNOBS.items():
            saved = {k: getattr(nd, k) for k in knobs}
            for k, v in knobs.items():
                setattr(nd, k, v)
            try:
                for page in (0, 16):
                    times = [
                        per_call_us(timer, s, page, batch=batch, native=True) for s in CONTEXTS
                    ]
                    print(_row(f"native {page or 'contiguous'}, {name}", times, base))
            finally:
                for k, v in saved.items():
                    setattr(nd, k, v)


def main() -> None:
    if "--native" in sys.argv:
        native_sweep()
        return
    timer = DeviceTimer(0)
    print(f"batch 1, per call at {' / '.join(map(str, CONTEXTS))} keys")
    contiguous = [per_call_us(timer, s, 0) for s in CONTEXTS]
    print(_row("contiguous", contiguous))
    for page, orders in ((64, ("identity", "random")), (16, ("identity", "runs16", "random"))):
        for order in orders:
            times = [per_call_us(timer, s, page, order) for s in CONTEXTS]
            print(_row(f"paged {page}, {order} table", times, contiguous))
    print("16-slot pages, random table:")
    for name, knobs in KNOBS.items():
        saved = {k: getattr(ad, k) for k in knobs}
        for k, v in knobs.items():
            setattr(ad, k, v)
        try:
            print(_row(f"  {name}", [per_call_us(timer, s, 16) for s in CONTEXTS], contiguous))
        except Exception as exc:  # a knob combination out of shared memory
            print(f"  {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
        finally:
            for k, v in saved.items():
                setattr(ad, k, v)
    few = [per_call_us(timer, s, 16, few=True) for s in CONTEXTS]
    print(_row("  the few-programs class", few, contiguous))


if __name__ == "__main__":
    main()
