"""Where batch-1 decode attention's time goes (diagnostic, GPU host).

    python benchmarks/tuning/diag_decode.py        # event timings (L2 flushed by a read, median)
    ncu --clock-control none --metrics gpu__time_duration.sum,... \\
        python benchmarks/tuning/diag_decode.py --ncu  # a few plain calls of each case, for ncu

bf16, 32 query / 8 KV heads, D128, one query token, batch 1, contexts 4096 / 16384 / 32768.
Prints GB/s of the K+V bytes and % of the 1 GiB copy for:
- the floor of one launch: an empty Triton kernel (what the event pair plus a launch cost);
- sdpa_decode with its default knobs and with single knobs changed (tune_decode's Shape);
- torch SDPA (when torch is importable).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import triton

import pygpukit as gp
from pygpukit.backends.triton_kernels import attention_decode as ad
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.benchmark.timing import DeviceTimer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_decode import Shape

CONTEXTS = (4096, 16384, 32768)
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "FEW_PROGRAMS_PER_SM=2": {"FEW_PROGRAMS_PER_SM": 2},
    "FEW_PROGRAMS_PER_SM=3": {"FEW_PROGRAMS_PER_SM": 3},
    "COMBINE_ELEMS=16384": {"COMBINE_ELEMS": 16384},
    "FEW_PROGRAMS_PER_SM=2,COMBINE_ELEMS=16384": {"FEW_PROGRAMS_PER_SM": 2, "COMBINE_ELEMS": 16384},
    "FEW_MIN_SPLIT_KEYS=64": {"FEW_MIN_SPLIT_KEYS": 64, "FEW_PROGRAMS_PER_SM": 3},
    "FEW_NUM_STAGES=3": {"FEW_NUM_STAGES": 3},
    "FEW_NUM_WARPS=8": {"FEW_NUM_WARPS": 8},
    "FEW_FUSED_COMBINE=False": {"FEW_FUSED_COMBINE": False},
    "FEW_BLOCK_N=32": {"FEW_BLOCK_N": 32},
    "FEW_SPLITS_NEEDED=0 (no few class)": {"FEW_SPLITS_NEEDED": 0},
}


# Kernel bodies take tl tensors: left unannotated.
@triton.jit
def _nop(X):  # type: ignore[no-untyped-def]
    pass


def _cases() -> list[tuple[str, int, Callable[[], Any], dict[str, Any]]]:
    """(name, K+V bytes, call, knobs) for every measured case."""
    dev = gp.Device("cuda", 0)
    out: list[tuple[str, int, Callable[[], Any], dict[str, Any]]] = []
    one = gp.empty((1,), "int32", dev)
    out.append(("empty kernel", 0, lambda: launch(_nop, (1,), one, num_warps=1), {}))
    for s in CONTEXTS:
        sh = Shape(1, s)
        for layout in ("contiguous", "paged16", "paged64"):
            for name, knobs in VARIANTS.items():
                if layout != "contiguous" and name not in ("default", "FEW_BLOCK_N=32"):
                    continue
                out.append((f"S{s} {layout} {name}", sh.bytes, sh.call(layout), knobs))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ncu", action="store_true", help="plain calls only (for Nsight Compute)")
    p.add_argument("--rounds", type=int, default=30)
    a = p.parse_args()
    if not gp.is_cuda_available():
        print("diag_decode: no CUDA device")
        return 1
    timer = DeviceTimer(0)
    ceiling = timer.copy_rate()
    print(f"device: {gp.get_device_properties(0).get('name')}; copy 1 GiB: {ceiling:.0f} GB/s")
    for name, nbytes, fn, knobs in _cases():
        saved = {k: getattr(ad, k) for k in knobs}
        for k, v in knobs.items():
            setattr(ad, k, v)
        try:
            if a.ncu:
                for _ in range(3):
                    fn()
                gp.synchronize()
                continue
            t = timer.median_seconds(fn, rounds=a.rounds)
        except Exception as exc:  # a knob combination that does not compile
            print(f"{name:<48} n/a: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            continue
        finally:
            for k, v in saved.items():
                setattr(ad, k, v)
        rate = f"{nbytes / t / 1e9:8.0f} GB/s ({100 * nbytes / t / 1e9 / ceiling:3.0f}%)"
        print(f"{name:<48} {t * 1e6:8.2f} us  {rate if nbytes else ''}")
    if timer.torch is not None:
        f = timer.torch.nn.functional.scaled_dot_product_attention
        for s in CONTEXTS:
            sh = Shape(1, s)
            tq, tk, tv = (timer.torch.from_dlpack(x) for x in (sh.q, sh.k, sh.v))
            if a.ncu:
                for _ in range(3):
                    f(tq, tk, tv, enable_gqa=True)
                continue
            t = timer.median_seconds(partial(f, tq, tk, tv, enable_gqa=True), rounds=a.rounds)
            gbs = sh.bytes / t / 1e9
            print(f"{f'S{s} torch SDPA':<48} {t * 1e6:8.2f} us  {gbs:8.0f} GB/s "
                  f"({100 * gbs / ceiling:3.0f}%)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
