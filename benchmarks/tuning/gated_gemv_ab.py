"""The quantized gated MLP's gate/up product in one launch or two, graph-timed.

    python benchmarks/tuning/gated_gemv_ab.py [--shapes 2048x16384 4096x28672] [--rows 1 4]
                                              [--formats int4 fp8 nvfp4] [--gemv-pdl on|off]

For each shape (K x 2I: the stacked [Wg; Wu] of a gated MLP), format (int4, fp8, nvfp4) and row
count, three chains of 20 calls each captured in a CUDA graph and timed over its replay (the
median of 5 replays, two alternating rounds):
- "plain": gp.linear_quantized(x, W) into [M, 2I], the plain decode GEMV on the same bytes;
- "one launch": gp.linear_silu_mul(x, W) with ops/gemv.QUANT_GATED_GEMV on (op
  gemv_<format>_silu_mul, the native gated kernel);
- "two launches": the same call with it off (linear_quantized, then silu_mul).
Consecutive calls read different copies of W (enough copies for 200 MB), so the L2 does not
serve them. The native GEMVs are launched early as shipped (--gemv-pdl off: plainly,
backends/native/gemv.PDL_LAUNCH); unlike in the decode step, no other kernel sits between the
products and W is read after the wait (no constant_weights()). The weights are random values
quantized on the device (the speed does not depend on them).
The comment above ops/gemv.QUANT_GATED_FORMATS records the result.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

import pygpukit as gp
from pygpukit import runtime
from pygpukit.benchmark.timing import replay_seconds

# the module (pygpukit.ops.gemv the attribute is the function gp.gemv)
ops_gemv = importlib.import_module("pygpukit.ops.gemv")


def chain_us(fn: Callable[[], object], reps: int = 20) -> float:
    """Device microseconds per call of fn over a graph of reps calls (median of 5 replays)."""
    dev = gp.device("cuda:0")
    stream = runtime.current_stream(dev)
    fn()  # compile and size outside the capture
    g = gp.CUDAGraph()
    with g.capture():
        for _ in range(reps):
            fn()
    times = [replay_seconds(g, stream, 1, warmup=1) * 1e6 / reps for _ in range(5)]
    return sorted(times)[2]


def rounds(x: gp.GPUArray, qws: list[gp.QuantizedWeight]) -> dict[str, list[float]]:
    """The three chains' us per call for x and the copies of one weight, two rounds."""
    m, n2 = x.shape[0], qws[0].shape[0]
    y2 = gp.empty((m, n2), gp.bfloat16, device="cuda:0")
    y = gp.empty((m, n2 // 2), gp.bfloat16, device="cuda:0")
    turn = [0]

    def weight() -> gp.QuantizedWeight:
        turn[0] = (turn[0] + 1) % len(qws)
        return qws[turn[0]]

    def plain() -> object:
        return gp.linear_quantized(x, weight(), out=y2)

    def gated(on: bool) -> Callable[[], object]:
        def call() -> object:
            ops_gemv.QUANT_GATED_GEMV = on  # read when the call routes
            return gp.linear_silu_mul(x, weight(), out=y)

        return call

    res: dict[str, list[float]] = {}
    for _ in range(2):
        for name, fn in (("plain", plain), ("one launch", gated(True)),
                         ("two launches", gated(False))):  # fmt: skip
            res.setdefault(name, []).append(chain_us(fn))
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["2048x16384", "4096x28672"])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4])
    p.add_argument("--formats", nargs="+", default=["int4", "fp8", "nvfp4"])
    p.add_argument("--gemv-pdl", default="on", choices=["on", "off"])
    args = p.parse_args(argv)
    from pygpukit.backends.native import gemv as native_gemv

    shipped = ops_gemv.QUANT_GATED_GEMV, native_gemv.PDL_LAUNCH
    native_gemv.PDL_LAUNCH = args.gemv_pdl == "on"
    rng = np.random.default_rng(0)

    def upload(rows: int, cols: int) -> gp.GPUArray:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        return gp.from_numpy(a, device="cuda:0").astype("bfloat16")

    try:
        for shape in args.shapes:
            k, n2 = (int(v) for v in shape.split("x"))
            for fmt in args.formats:
                q0 = gp.quantize_weight(upload(n2, k), fmt, device="cuda:0")
                assert q0.scales is not None
                copies = max(2, int(np.ceil(200e6 / q0.nbytes)))
                qws = [q0] + [
                    gp.QuantizedWeight(fmt, q0.data.copy(), q0.scales.copy(), block=q0.block,
                                       global_scale=q0.global_scale)
                    for _ in range(copies - 1)
                ]  # fmt: skip
                for m in args.rows:
                    res = rounds(upload(m, k), qws)
                    cells = ", ".join(f"{name} {v[0]:.2f} / {v[1]:.2f}" for name, v in res.items())
                    print(f"K{k} 2I{n2} {fmt} M{m} (us, two rounds): {cells}", flush=True)
                del qws, q0
    finally:
        ops_gemv.QUANT_GATED_GEMV, native_gemv.PDL_LAUNCH = shipped
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
