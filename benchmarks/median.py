"""gp.median_filter against torch on a batch of spectrograms.

    python benchmarks/median.py [--sizes 31 17] [--dtypes float32 float16 float64] [--quick]
                                [--rounds 10] [--json OUT]

The magnitude-spectrogram shape HPSS filters: 32 rows x 60 s at 16 kHz with n_fft 2048 and
hop 512, i.e. [32, 1025, 1876] (--quick: [4, 1025, 200]), random non-negative values. For each
dtype, window size and axis (-1: along the frames, librosa's harmonic filter; -2: along the
bins, its percussive one) the routed op is timed with CUDA events after warm-up, L2 flushed,
median of --rounds (pygpukit.benchmark.timing), beside torch's formulation in the same run:
the reflected windows gathered (``S[..., idx]``; torch has no 'symmetric' pad) and
``torch.median(-1)``. The torch result is compared with gp's (an odd median is a selection:
they must be equal). GB/s counts input + output bytes (the kernel is compute-bound: it reports
how far from the copy rate it is). Without a GPU the script says so and exits; without torch
its columns stay empty. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import pygpukit as gp
from pygpukit.benchmark.report import emit

_TORCH_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _windows(torch: Any, n: int, size: int, device: Any) -> Any:
    """[n, size] indices of each output's window, reflected at both ends."""
    idx = np.pad(np.arange(n), size // 2, mode="symmetric")
    win = np.lib.stride_tricks.sliding_window_view(idx, size)
    return torch.from_numpy(np.ascontiguousarray(win)).to(device)


def _torch_fn(torch: Any, tx: Any, size: int, axis: int) -> Any:
    if axis == -1:
        idx = _windows(torch, tx.shape[-1], size, tx.device)
        return lambda: tx[..., idx].median(-1).values
    idx = _windows(torch, tx.shape[-2], size, tx.device)
    return lambda: tx.transpose(-1, -2)[..., idx].median(-1).values.transpose(-1, -2)


def _torch_case(
    torch: Any, timer: Any, x: gp.GPUArray, fn: Any, t: float, size: int, axis: int, rounds: int
) -> dict[str, Any]:
    """torch's time, the speed ratio against gp's time t, and whether the results are equal."""
    tx = torch.from_dlpack(x)
    tfn = _torch_fn(torch, tx, size, axis)
    tt = timer.median_seconds(tfn, rounds=max(3, rounds // 2))
    return {
        "torch_ms": tt * 1e3,
        "speed_vs_torch": tt / t,
        "equal_to_torch": bool(torch.equal(torch.from_dlpack(fn()), tfn())),
    }


def run(args: argparse.Namespace, timer: Any) -> list[dict[str, Any]]:
    torch = timer.torch
    shape = (4, 1025, 200) if args.quick else (32, 1025, 1876)
    rng = np.random.default_rng(0)
    host = np.abs(rng.standard_normal(shape, dtype=np.float32))
    rows = []
    for dt in args.dtypes:
        x = gp.from_numpy(host, device="cuda:0").astype(dt)
        for size in args.sizes:
            for axis in (-1, -2):

                def fn(x: Any = x, size: int = size, axis: int = axis) -> Any:
                    return gp.median_filter(x, size, axis=axis)

                t = timer.median_seconds(fn, rounds=args.rounds)
                row: dict[str, Any] = {
                    "dtype": dt, "size": size, "axis": axis, "shape": list(shape),
                    "gp_ms": t * 1e3, "gp_gbs": 2 * x.nbytes / t / 1e9,
                }  # fmt: skip
                if torch is not None and dt in _TORCH_DTYPES:
                    try:
                        row.update(_torch_case(torch, timer, x, fn, t, size, axis, args.rounds))
                    except Exception as exc:  # a dtype this torch build cannot exchange/median
                        row["torch_error"] = repr(exc)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def report(rows: list[dict[str, Any]], copy_gbs: float) -> None:
    print(
        f"{'dtype':>9} {'size':>4} {'axis':>4} {'gp ms':>8} {'GB/s':>7} {'% copy':>6} "
        f"{'torch ms':>9} {'vs torch':>8} {'equal':>5}"
    )
    for r in rows:
        tms = r.get("torch_ms")
        vs = r.get("speed_vs_torch")
        print(
            f"{r['dtype']:>9} {r['size']:>4} {r['axis']:>4} {r['gp_ms']:>8.2f} "
            f"{r['gp_gbs']:>7.1f} {100 * r['gp_gbs'] / copy_gbs:>5.1f}% "
            f"{'-' if tms is None else format(tms, '.2f'):>9} "
            f"{'-' if vs is None else format(vs, '.2f') + 'x':>8} "
            f"{r.get('equal_to_torch', '-')!s:>5}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[31, 17])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16", "float64"])
    p.add_argument("--quick", action="store_true", help="[4, 1025, 200] (a smoke run)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    args = p.parse_args(argv)
    if not gp.is_cuda_available():
        print("benchmarks/median.py: no CUDA device; nothing to time")
        return 0
    from pygpukit.benchmark.timing import DeviceTimer

    timer = DeviceTimer(0)
    copy_gbs = timer.copy_rate()
    rows = run(args, timer)
    report(rows, copy_gbs)
    props = gp.get_device_properties(0)
    result = {"device": str(props.get("name", "cuda:0")), "copy_gbs": copy_gbs, "cases": rows}
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
