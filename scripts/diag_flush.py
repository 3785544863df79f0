"""How the L2 flush before a timed call changes small-kernel timings (diagnostic, GPU host).

python scripts/diag_flush.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import torch

import pygpukit as gp
from pygpukit import _core
from pygpukit.benchmark.timing import DeviceTimer, L2Flush

FLUSH = 256 << 20


def main() -> None:
    timer = DeviceTimer(0)  # one stream for pygpukit and torch, events, median
    dev, stream = timer.device, timer.stream
    wbuf = gp.empty((FLUSH // 4,), gp.int32, dev)
    rflush = L2Flush(dev)  # the benchmarks' flush: a read of 256 MiB
    modes: dict[str, Callable[[], Any]] = {
        "memset": lambda: wbuf.fill_(0),
        "read": rflush,
        "memset+read": lambda: (wbuf.fill_(0), rflush()),
    }

    def med(fn: Callable[[], Any], flush: Callable[[], Any]) -> float:
        return timer.median_seconds(fn, flush=flush) * 1e6

    cases: list[tuple[str, Callable[[], Any], float]] = []
    for nbytes in (1 << 30, 64 << 20, 16 << 20):
        src = gp.empty((nbytes,), gp.uint8, dev)
        dst = gp.empty((nbytes,), gp.uint8, dev)
        cases.append(
            (
                f"copy {nbytes >> 20} MiB",
                lambda s=src, d=dst, n=nbytes: _core.memcpy_dtod(
                    d.data_ptr(), s.data_ptr(), n, stream
                ),
                2.0 * nbytes,
            )
        )
    T, H, D = 4096, 32, 128
    x = gp.from_numpy(
        np.random.default_rng(0).standard_normal((T, H, D), np.float32).astype(ml_dtypes.bfloat16),
        device=dev,
    )
    cos, sin = gp.rope_tables(T, D, device=dev)
    rout = gp.empty_like(x)
    cases.append(("rope T4096", lambda: gp.rope(x, cos, sin, out=rout), 4.0 * T * H * D))
    for b, s in ((1, 4096), (1, 16384), (1, 32768), (16, 4096)):
        q = torch.randn(b, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, 8, s, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, 8, s, 128, device="cuda", dtype=torch.bfloat16)
        gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
        lens = gp.from_numpy(np.full(b, s, np.int32), device=dev)
        o = gp.empty_like(gq)
        nb = 2.0 * b * 8 * s * 128 * 2
        f = torch.nn.functional.scaled_dot_product_attention
        cases.append(
            (
                f"sdpa_decode B{b} S{s}",
                lambda gq=gq, gk=gk, gv=gv, lens=lens, o=o: gp.sdpa_decode(gq, gk, gv, lens, out=o),
                nb,
            )
        )
        cases.append((f"gp.sdpa B{b} S{s}", lambda gq=gq, gk=gk, gv=gv: gp.sdpa(gq, gk, gv), nb))
        cases.append(
            (f"torch sdpa B{b} S{s}", lambda q=q, k=k, v=v, f=f: f(q, k, v, enable_gqa=True), nb)
        )
    kk, nn = 8192, 29568
    g = torch.Generator(device="cuda").manual_seed(0)
    w = torch.randn(nn, kk, device="cuda", dtype=torch.bfloat16, generator=g)
    gw = gp.from_dlpack(w)
    x1 = gp.from_dlpack(torch.randn(1, kk, device="cuda", dtype=torch.bfloat16))
    y1 = gp.empty((1, nn), gp.bfloat16, dev)
    cases.append(("gemv bf16", lambda: gp.gemv(x1, gw, out=y1), nn * kk * 2.0))
    i4raw = torch.randint(0, 256, (nn, kk // 2), device="cuda", dtype=torch.uint8, generator=g)
    try:
        s4 = gp.from_dlpack(torch.rand(nn, kk // 128, device="cuda", generator=g) + 0.5)
        qw = gp.QuantizedWeight("int4", _as_int4(i4raw, nn, kk), s4)
        cases.append(("gemv int4", lambda: gp.linear_quantized(x1, qw, out=y1), nn * kk * 2.0))
    except Exception as e:  # diagnostic only
        print("int4 case skipped:", e)
    print(f"{'case':28s}" + "".join(f"{m:>22s}" for m in modes))
    for name, fn, nbytes in cases:
        row = f"{name:28s}"
        for flush in modes.values():
            us = med(fn, flush)
            row += f"{us:10.1f}us {nbytes / us / 1e3:7.0f}GB/s"
        print(row, flush=True)


def _as_int4(raw: Any, n: int, k: int) -> Any:
    import sys

    sys.path.insert(0, "benchmarks")
    from test_gemv import _bytes_into  # type: ignore[import-not-found]

    return _bytes_into(torch, raw, (n, k), gp.int4)


if __name__ == "__main__":
    main()
