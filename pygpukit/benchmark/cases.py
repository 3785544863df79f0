"""The bench CLI's cases: each suite builds its inputs, times pygpukit and the peer measured in
the same run (torch, when importable) and returns Result rows.

Suites: ``copy`` (the bandwidth ceiling: device-to-device copy of 1 GiB), ``ops`` (rmsnorm,
softmax, silu_mul, rope at LLM sizes, GB/s), ``gemm`` (matmul TFLOP/s per size and dtype, fp8
through gp.matmul_fp8 when present), ``gemv`` (M=1 decode products, GB/s of weight bytes, the
quantized formats when present), ``attention`` (causal prefill TFLOP/s, decode GB/s of KV bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

import pygpukit as gp
from pygpukit import _core
from pygpukit.benchmark.report import Result
from pygpukit.benchmark.timing import DeviceTimer

__all__ = ["Options", "SUITES", "run_suites"]

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn"}


@dataclass
class Options:
    quick: bool
    sizes: list[int]
    dtypes: list[str]  # short names: bf16, fp16, fp32, fp8

    @property
    def rounds(self) -> int:
        return 8 if self.quick else 30


def _rand(shape: tuple[int, ...], dtype: str, scale: float = 1.0) -> gp.GPUArray:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)
    return gp.from_numpy(x, device="cuda:0").astype(dtype)


def _torch(a: gp.GPUArray) -> Any:
    import torch

    return torch.from_dlpack(a)


class _Ctx:
    def __init__(self, timer: DeviceTimer, opts: Options) -> None:
        self.t = timer
        self.opts = opts
        self.ceiling: float | None = None  # GB/s of the copy in this run

    def time(self, fn: Callable[[], Any]) -> float:
        return self.t.median_seconds(fn, rounds=self.opts.rounds)

    def row(
        self,
        suite: str,
        name: str,
        unit: str,
        work: float,
        ours: Callable[[], Any],
        peer: str = "",
        theirs: Callable[[], Any] | None = None,
        ceiling: float | None = None,
        note: str = "",
    ) -> Result:
        """work: bytes (GB/s) or flops (TFLOP/s) per call."""
        scale = 1e9 if unit == "GB/s" else 1e12
        s = self.time(ours)
        r = Result(suite, name, unit, s, work / s / scale, note=note)
        if theirs is not None and self.t.torch is not None:
            ps = self.time(theirs)
            r.peer, r.peer_seconds, r.peer_rate = peer, ps, work / ps / scale
        if ceiling:
            r.ceiling_pct = 100.0 * r.rate / ceiling
        return r


def suite_copy(c: _Ctx) -> list[Result]:
    n = (256 << 20) if c.opts.quick else (1 << 30)
    a = gp.empty((n,), gp.uint8, device="cuda:0")
    b = gp.empty((n,), gp.uint8, device="cuda:0")
    s = c.t.stream
    theirs: Callable[[], Any] | None = None
    if c.t.torch is not None:
        ta, tb = _torch(a), _torch(b)
        theirs = lambda: tb.copy_(ta)  # noqa: E731
    r = c.row(
        "copy",
        f"{n >> 20} MiB",
        "GB/s",
        2 * n,
        lambda: _core.memcpy_dtod(b.data_ptr(), a.data_ptr(), n, s),
        "torch copy_",
        theirs,
    )
    c.ceiling = r.rate
    r.ceiling_pct = 100.0
    return [r]


def suite_ops(c: _Ctx) -> list[Result]:
    rows_n = 4096 if c.opts.quick else 16384
    x = _rand((rows_n, 8192), "bfloat16")
    w = _rand((8192,), "bfloat16")
    xb = 2 * x.nbytes
    torch = c.t.torch
    out: list[Result] = []
    tx = _torch(x) if torch else None
    tw = _torch(w) if torch else None
    F = torch.nn.functional if torch else None
    out.append(
        c.row(
            "ops",
            f"rmsnorm {rows_n}x8192 bf16",
            "GB/s",
            xb,
            lambda: gp.rmsnorm(x, w),
            "F.rms_norm",
            (lambda: F.rms_norm(tx, (8192,), tw, 1e-6)) if F else None,
            c.ceiling,
        )
    )
    out.append(
        c.row(
            "ops",
            f"softmax {rows_n}x8192 bf16",
            "GB/s",
            xb,
            lambda: gp.softmax(x),
            "torch.softmax",
            (lambda: torch.softmax(tx, -1)) if torch else None,
            c.ceiling,
        )
    )
    g = _rand((rows_n, 8192), "bfloat16")
    tg = _torch(g) if torch else None
    out.append(
        c.row(
            "ops",
            f"silu_mul {rows_n}x8192 bf16",
            "GB/s",
            3 * x.nbytes,
            lambda: gp.silu_mul(g, x),
            "F.silu(g) * x",
            (lambda: F.silu(tg) * tx) if F else None,
            c.ceiling,
        )
    )
    t, h, d = 4096, 32, 128
    q = _rand((t, h, d), "bfloat16")
    ang = np.outer(np.arange(t), 1.0 / 10000 ** (np.arange(0, d, 2) / d))
    cos = gp.from_numpy(np.cos(ang).astype(np.float32), device="cuda:0")
    sin = gp.from_numpy(np.sin(ang).astype(np.float32), device="cuda:0")
    qo = gp.empty_like(q)
    out.append(
        c.row(
            "ops",
            f"rope T{t} H{h} D{d} bf16",
            "GB/s",
            2 * q.nbytes,
            lambda: gp.rope(q, cos, sin, out=qo),
            ceiling=c.ceiling,
        )
    )
    return out


def suite_gemm(c: _Ctx) -> list[Result]:
    out: list[Result] = []
    torch = c.t.torch
    for dt in c.opts.dtypes:
        for n in c.opts.sizes:
            flops = 2.0 * n * n * n
            if dt == "fp8":
                out.extend(_gemm_fp8(c, n, flops))
                continue
            name = DTYPE_NAMES[dt]
            a, b = _rand((n, n), name), _rand((n, n), name)
            theirs: Callable[[], Any] | None = None
            if torch is not None:
                ta, tb = _torch(a), _torch(b)
                theirs = lambda ta=ta, tb=tb: torch.matmul(ta, tb)  # noqa: E731
            out.append(
                c.row(
                    "gemm",
                    f"{dt} {n}^3",
                    "TFLOP/s",
                    flops,
                    partial(gp.matmul, a, b),
                    "torch.matmul",
                    theirs,
                    note="exact fp32" if dt == "fp32" else "",
                )
            )
    return out


def _gemm_fp8(c: _Ctx, n: int, flops: float) -> list[Result]:
    mm = getattr(gp, "matmul_fp8", None)
    if mm is None:
        return [Result("gemm", f"fp8 {n}^3", "TFLOP/s", 0.0, 0.0, note="gp.matmul_fp8 absent")]
    a = _rand((n, n), "float32").astype("float8_e4m3fn")
    b = _rand((n, n), "float32").astype("float8_e4m3fn")
    one = gp.from_numpy(np.ones((1,), np.float32), device="cuda:0")
    torch = c.t.torch
    theirs: Callable[[], Any] | None = None
    if torch is not None:
        ta, tb = _torch(a), _torch(b)
        ts = torch.ones((), device="cuda", dtype=torch.float32)
        theirs = lambda: torch._scaled_mm(  # noqa: E731
            ta, tb.t(), scale_a=ts, scale_b=ts, out_dtype=torch.bfloat16
        )
    return [
        c.row(
            "gemm",
            f"fp8 {n}^3",
            "TFLOP/s",
            flops,
            lambda: mm(a, b, scale_a=one, scale_b=one, out_dtype="bfloat16"),
            "torch._scaled_mm",
            theirs,
        )
    ]


GEMV_SHAPES = [(8192, 29568), (4096, 14336)]


def suite_gemv(c: _Ctx) -> list[Result]:
    out: list[Result] = []
    torch = c.t.torch
    for k, n in GEMV_SHAPES:
        x = _rand((1, k), "bfloat16")
        w = _rand((n, k), "bfloat16", 0.02)
        theirs: Callable[[], Any] | None = None
        if torch is not None:
            tx, tw = _torch(x), _torch(w)
            theirs = lambda tx=tx, tw=tw: torch.nn.functional.linear(tx, tw)  # noqa: E731
        out.append(
            c.row(
                "gemv",
                f"bf16 M1 K{k} N{n}",
                "GB/s",
                float(w.nbytes),
                partial(gp.linear, x, w),
                "F.linear",
                theirs,
                c.ceiling,
            )
        )
        quant = getattr(gp, "quantize_weight", None)
        lin_q = getattr(gp, "linear_quantized", None)
        if quant is None or lin_q is None:
            continue
        for fmt in ("fp8", "int4", "nvfp4"):
            try:
                qw = quant(w, format=fmt)
            except Exception as exc:  # a format this build lacks: say so in the table
                out.append(Result("gemv", f"{fmt} M1 K{k} N{n}", "GB/s", 0.0, 0.0, note=str(exc)))
                continue
            r = c.row(
                "gemv",
                f"{fmt} M1 K{k} N{n}",
                "GB/s",
                float(w.nbytes),
                partial(lin_q, x, qw),
                ceiling=c.ceiling,
                note="rate in bf16-equivalent weight bytes",
            )
            out.append(r)
    return out


PREFILL = [(1, 32, 4096, 128), (4, 16, 4096, 64)]


def suite_attention(c: _Ctx) -> list[Result]:
    out: list[Result] = []
    torch = c.t.torch
    for b, h, s, d in PREFILL:
        q, k, v = (_rand((b, h, s, d), "bfloat16") for _ in range(3))
        flops = 4.0 * b * h * s * s * d / 2  # causal: half of the S x S products
        theirs: Callable[[], Any] | None = None
        if torch is not None:
            tq, tk, tv = _torch(q), _torch(k), _torch(v)
            sdpa = torch.nn.functional.scaled_dot_product_attention
            theirs = lambda tq=tq, tk=tk, tv=tv, f=sdpa: f(  # noqa: E731
                tq, tk, tv, is_causal=True
            )
        out.append(
            c.row(
                "attention",
                f"prefill causal B{b} H{h} S{s} D{d} bf16",
                "TFLOP/s",
                flops,
                partial(gp.sdpa, q, k, v, causal=True),
                "torch SDPA",
                theirs,
            )
        )
    return out


SUITES: dict[str, Callable[[_Ctx], list[Result]]] = {
    "copy": suite_copy,
    "ops": suite_ops,
    "gemm": suite_gemm,
    "gemv": suite_gemv,
    "attention": suite_attention,
}


def run_suites(names: list[str], opts: Options, device: int = 0) -> list[Result]:
    """Run the named suites (the copy ceiling always first) on ``device``."""
    c = _Ctx(DeviceTimer(device), opts)
    results = suite_copy(c)
    for name in names:
        if name != "copy":
            results.extend(SUITES[name](c))
    return results
