"""Quantized-weight products beyond decode: the mixed-input GEMM (the weight dequantized in the
mainloop), the decode GEMV it takes over from, W8A8, and each format's accuracy.

    python benchmarks/mixed_gemm.py [--rows 1 4 16 32 64 512 4096] [--formats fp8 int4 ...]
                                    [--sweep] [--accuracy] [--json OUT] [--shapes NxK ...]

1. For each weight format and shape (K4096 N14336, K14336 N4096: a Llama-3-8B MLP; --shapes
   14336x4096 4096x4096 ... names others, N outputs x K inputs) and each
   number of rows M: gp.linear_quantized as routed ("routed", its ratio to bf16 and % of
   copy bandwidth on the weight bytes), and each of its paths alone: the Triton mixed-input
   GEMM (qgemm_<format>, or qgemm_w8a8 on quantize_fp8's codes), the native decode GEMV
   (gemv_<format>, M <= 64, when the native extension is built), the weight dequantized to
   bf16 + gp.linear ("dense", M >= 64), the same rounded int4 / fp8 weight in CUTLASS's
   mixed-input GEMM ("cutlass": op qgemm_<format>_dense, M >= 16, when the extension has the
   mixed_gemm family and the GPU is a Hopper), cuBLASLt's FP8 x FP8 (matmul_fp8, for w8a8); against
   the dense bf16 product of the same shape in the same run (gp.linear = cuBLASLt, and
   torch's F.linear when torch is importable). Median device time with the L2 flushed. The
   crossovers of pygpukit/routing/crossovers.py (QGEMV_MAX_ROWS, QGEMV_MAX_ROWS_DEEP,
   QDENSE_MIN_ROWS, QDENSE_FUSED_MAX_ROWS, W8A8_MAX_ROWS) are read off these rows.
2. --sweep: qgemm tiles (BM, BN, BK, warps, stages) per M on the shapes, best first
   (backends/triton_kernels/qgemm.py CONFIGS comes from it).
3. --accuracy (runs on the CPU too): relative error of each format's product against the exact
   float64 product with the unquantized weight, for Gaussian x and W and for x with a few
   outlier channels (100x, as LLM activations have), bf16 x; the GGUF formats gguf can quantize
   to are listed too. Then nvfp4's one float32 global scale a tensor against the engine's
   stacked weights (gate and up of a gated MLP, q/k/v): the relative error of the up half's
   product when the two halves are quantized as one [2N, K] weight against each alone, for up
   weights 1 to 1e-5 times the gate's scale.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))  # _dense_peer

import numpy as np
from _dense_peer import dense_peers

import pygpukit as gp
from pygpukit.backends.triton_kernels import qgemm as tq

SHAPES = [(14336, 4096), (4096, 14336)]  # (N, K)
FORMATS = {  # name: (format, quantize_weight keywords)
    "fp8": ("fp8", {}),
    "fp8_b128": ("fp8", {"block": 128}),
    "int4": ("int4", {}),
    "int4_bf16s": ("int4", {"scale_dtype": "bfloat16"}),
    "nvfp4": ("nvfp4", {}),
    "w8a8": ("w8a8", {}),
}

# GGUF formats gguf's quantizers make (llama.cpp's reference rounding), for --accuracy beside
# them; their products are benchmarks/quantized.py's.
GGUF_ACCURACY = ("q8_0", "q5_1", "q4_1", "q4_0")


def _params(qw: gp.QuantizedWeight) -> dict[str, Any]:
    if qw.format == "fp8":
        return {"block": qw.block}
    if qw.format == "int4":
        return {"group": qw.block}
    return {"global_scale": qw.global_scale}


def _weight(name: str, n: int, k: int, device: str = "cuda:0") -> gp.QuantizedWeight:
    fmt, kw = FORMATS[name]
    w = np.random.default_rng(1).standard_normal((n, k)).astype(np.float32) * 0.02
    return gp.quantize_weight(w, fmt, device=device, **kw)


def _native_gemv() -> Any:
    try:
        from pygpukit.backends.native import gemv as ng
        from pygpukit.backends.native._libs import extension, status

        if status()[0] and hasattr(extension(), "gemv"):
            return ng
    except Exception:
        pass
    return None


def _native_mixed() -> Any:
    """backends/native/mixed_gemm.py when the extension has the mixed_gemm family and the
    device is a Hopper GPU, else None."""
    try:
        from pygpukit.backends.native import mixed_gemm as nm
        from pygpukit.backends.native._libs import extension, status

        props = gp.runtime.device("cuda:0").properties
        hopper = (props["major"], props["minor"]) == (9, 0)
        if status()[0] and hasattr(extension(), "mixed_gemm") and hopper:
            return nm
    except Exception:
        pass
    return None


def products(
    timer: Any,
    names: list[str],
    rows: list[int],
    copy_gbs: float,
    shapes: list[tuple[int, int]] = SHAPES,
) -> list[dict]:
    """Each path of linear_quantized timed alone at every M, and the routed call (module
    docstring)."""
    ng = _native_gemv()
    nm = _native_mixed()
    print(
        f"native GEMV: {'built' if ng else 'not built (no gemv column)'}; CUTLASS mixed-input: "
        f"{'built' if nm else 'not built or not Hopper (no cutlass column)'}",
        flush=True,
    )
    out = []
    print(f"{'N x K':>12} {'format':>10} {'M':>5} {'routed':>8} {'x bf16':>6} {'% bw':>5} "
          f"{'qgemm':>8} {'cutlass':>8} {'gemv':>8} {'dense':>8} {'fp8 cuBLASLt':>12} "
          f"{'bf16 gp':>8} {'torch':>8}", flush=True)  # fmt: skip

    def us(t: float | None) -> str:
        return "-" if t is None else f"{t * 1e6:.1f}"

    for n, k, m, x, t_dense, t_torch in dense_peers(timer, shapes, rows):
        for name in names:
            qw = _weight(name, n, k)
            t = timer.median_seconds(lambda x=x, qw=qw: gp.linear_quantized(x, qw))
            t_q = t_gemv = t_deq = t_lt = t_cut = None
            if qw.format == "w8a8":
                q, sa = gp.quantize_fp8(x, granularity="row")
                assert qw.scales is not None
                t_q = timer.median_seconds(
                    lambda q=q, sa=sa, qw=qw: tq.qgemm_w8a8(
                        q, sa, qw.data, qw.scales, out_dtype="bfloat16"
                    )
                )
                t_lt = timer.median_seconds(
                    lambda q=q, sa=sa, qw=qw: gp.matmul_fp8(
                        q, qw.data, scale_a=sa, scale_b=qw.scales
                    )
                )
            else:
                fn = getattr(tq, f"qgemm_{qw.format}")
                kw = _params(qw)
                t_q = timer.median_seconds(
                    lambda fn=fn, x=x, qw=qw, kw=kw: fn(x, qw.data, qw.scales, None, **kw)
                )
                if nm is not None and qw.format in ("int4", "fp8") and m >= 16:
                    cut = getattr(nm, f"qgemm_{qw.format}_dense")
                    t_cut = timer.median_seconds(
                        lambda cut=cut, x=x, qw=qw, kw=kw: cut(x, qw.data, qw.scales, **kw)
                    )
                if ng is not None and m <= 64:
                    g = getattr(ng, f"gemv_{qw.format}")
                    t_gemv = timer.median_seconds(
                        lambda g=g, x=x, qw=qw, kw=kw: g(x, qw.data, qw.scales, None, **kw)
                    )
                if m >= 64:
                    t_deq = timer.median_seconds(
                        lambda x=x, qw=qw: gp.linear(
                            x,
                            tq.dequantize_weight(
                                qw.data, qw.scales, fmt=qw.format, block=qw.block,
                                global_scale=qw.global_scale, out_dtype="bfloat16",
                            ),
                        )
                    )  # fmt: skip
            bw = qw.nbytes / t / (copy_gbs * 1e9)
            row = {
                "n": n, "k": k, "m": m, "format": name, "us": t * 1e6, "bw_frac": bw,
                "tflops": 2 * m * n * k / t / 1e12,
                "qgemm_us": None if t_q is None else t_q * 1e6,
                "cutlass_us": None if t_cut is None else t_cut * 1e6,
                "gemv_us": None if t_gemv is None else t_gemv * 1e6,
                "dense_us": None if t_deq is None else t_deq * 1e6,
                "fp8_cublaslt_us": None if t_lt is None else t_lt * 1e6,
                "bf16_gp_us": t_dense * 1e6,
                "bf16_torch_us": None if t_torch is None else t_torch * 1e6,
            }  # fmt: skip
            out.append(row)
            print(f"{n:>6}x{k:<5} {name:>10} {m:>5} {us(t):>8} {t_dense / t:6.2f} "
                  f"{100 * bw:4.0f}% {us(t_q):>8} {us(t_cut):>8} {us(t_gemv):>8} {us(t_deq):>8} "
                  f"{us(t_lt):>12} {us(t_dense):>8} {us(t_torch):>8}",
                  flush=True)  # fmt: skip
    return out


def sweep(
    timer: Any, names: list[str], rows: list[int], shapes: list[tuple[int, int]] = SHAPES
) -> list[dict]:
    """qgemm tiles per M (module docstring); restores CONFIGS after."""
    best = []
    orig = tq.config_for
    try:
        for name in names:
            if FORMATS[name][0] == "w8a8":
                continue
            for n, k in shapes:
                qw = _weight(name, n, k)
                fn = getattr(tq, f"qgemm_{qw.format}")
                kw = _params(qw)
                for m in rows:
                    x = gp.from_numpy(np.ones((m, k), np.float32), device="cuda:0").astype(
                        "bfloat16"
                    )
                    res = []
                    for bm in (16, 32, 64, 128):
                        if bm > max(16, 2 * m):
                            continue
                        for bn in (64, 128):
                            for bk in (64, 128):
                                for warps in (4, 8):
                                    for stages in (3, 4):
                                        cfg = tq.QgemmConfig(bm, bn, bk, warps, stages)
                                        tq.config_for = lambda mm, c=cfg: c  # type: ignore[assignment]
                                        try:
                                            t = timer.median_seconds(
                                                lambda fn=fn, x=x, qw=qw, kw=kw: fn(
                                                    x, qw.data, qw.scales, None, **kw
                                                ),
                                                rounds=10,
                                            )
                                        except Exception as e:  # out of shared memory, ...
                                            print(f"  {cfg}: {type(e).__name__}", flush=True)
                                            continue
                                        res.append((t, cfg))
                    res.sort(key=lambda r: r[0])
                    t, cfg = res[0]
                    print(f"sweep {name} {n}x{k} m={m}: best {tuple(cfg)} {t * 1e6:.1f} us; "
                          f"next {[(round(r[0] * 1e6, 1), tuple(r[1])) for r in res[1:4]]}",
                          flush=True)  # fmt: skip
                    best.append({"format": name, "n": n, "k": k, "m": m, "cfg": list(cfg),
                                 "us": t * 1e6})  # fmt: skip
    finally:
        tq.config_for = orig  # type: ignore[assignment]
    return best


def accuracy(device: str) -> list[dict]:
    """Relative errors against the exact product (module docstring)."""
    rng = np.random.default_rng(0)
    n, k, m = 256, 1024, 64
    w = rng.standard_normal((n, k))
    cases = {"gaussian": rng.standard_normal((m, k))}
    x = rng.standard_normal((m, k))
    x[:, rng.choice(k, 8, replace=False)] *= 100.0
    cases["outliers"] = x
    out = []
    for cname, x64 in cases.items():
        xb = gp.from_numpy(x64.astype(np.float32), device=device).astype("bfloat16")
        xr = xb.astype("float32").to_numpy().astype(np.float64)
        exact = x64 @ w.T
        dense = gp.linear(xb, gp.from_numpy(w.astype(np.float32), device=device).astype("bfloat16"))
        errs = {"bf16": dense}
        for name in (*FORMATS, *GGUF_ACCURACY):
            fmt, kw = FORMATS.get(name, (name, {}))
            errs[name] = gp.linear_quantized(xb, gp.quantize_weight(w, fmt, device=device, **kw))
        for name, y in errs.items():
            yy = y.astype("float32").to_numpy().astype(np.float64)
            rel = float(np.linalg.norm(yy - exact) / np.linalg.norm(exact))
            relx = float(np.linalg.norm(yy - xr @ w.T) / np.linalg.norm(exact))
            out.append({"case": cname, "format": name, "rel": rel, "rel_vs_bf16_x": relx})
            print(f"accuracy {cname:>9} {name:>10}: {rel:.2e} relative (Frobenius) to the exact "
                  f"product, {relx:.2e} to the product of the bf16 x", flush=True)  # fmt: skip
    out.extend(_stacked(device))
    return out


def _stacked(device: str) -> list[dict]:
    """nvfp4 error of each half of a stacked [gate; up] weight, quantized stacked and alone."""
    rng = np.random.default_rng(1)
    n, k, m = 256, 1024, 64
    xb = gp.from_numpy(rng.standard_normal((m, k)).astype(np.float32), device=device)
    xb = xb.astype("bfloat16")
    xr = xb.astype("float32").to_numpy().astype(np.float64)

    def rel(y: gp.GPUArray, w: np.ndarray) -> float:
        exact = xr @ w.T
        yy = y.astype("float32").to_numpy().astype(np.float64)
        return float(np.linalg.norm(yy - exact) / np.linalg.norm(exact))

    out = []
    for ratio in (1.0, 1e-2, 1e-4, 1e-5):
        gate = rng.standard_normal((n, k))
        up = rng.standard_normal((n, k)) * ratio
        both = gp.linear_quantized(xb, gp.quantize_weight(np.vstack([gate, up]), "nvfp4",
                                                          device=device))  # fmt: skip
        alone = gp.linear_quantized(xb, gp.quantize_weight(up, "nvfp4", device=device))
        row = {"case": f"stacked, up = {ratio:g} x gate", "format": "nvfp4",
               "up_rel_stacked": rel(both[:, n:], up), "up_rel_alone": rel(alone, up),
               "gate_rel_stacked": rel(both[:, :n], gate)}  # fmt: skip
        out.append(row)
        print(f"accuracy nvfp4 stacked [gate; up], up {ratio:g} x gate: up "
              f"{row['up_rel_stacked']:.2e} stacked / {row['up_rel_alone']:.2e} alone, gate "
              f"{row['gate_rel_stacked']:.2e}", flush=True)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 32, 64, 512, 4096])
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--sweep-rows", type=int, nargs="+", default=[16, 32, 64, 512, 4096])
    p.add_argument("--accuracy", action="store_true")
    p.add_argument("--skip-products", action="store_true")
    p.add_argument("--device", default=None, help="for --accuracy alone (default: the GPU)")
    p.add_argument("--json", default=None)
    p.add_argument(
        "--shapes", nargs="+", default=[f"{n}x{k}" for n, k in SHAPES], metavar="NxK",
        help="weight shapes, N (outputs) x K (inputs)",
    )  # fmt: skip
    args = p.parse_args(argv)
    try:
        shapes = [(int(a), int(b)) for a, b in (t.lower().split("x") for t in args.shapes)]
    except ValueError:
        p.error(f"--shapes takes NxK pairs such as 14336x4096, got {args.shapes}")
    if any(n < 1 or k < 1 for n, k in shapes):
        p.error("--shapes: N and K must be positive")
    res: dict[str, Any] = {}
    if args.accuracy:
        res["accuracy"] = accuracy(args.device or ("cuda:0" if gp.device_count() else "cpu"))
    if args.sweep or not args.skip_products:
        from pygpukit.benchmark.timing import DeviceTimer

        timer = DeviceTimer(0)
        copy_gbs = timer.copy_rate()
        res["copy_gbs"] = copy_gbs
        print(f"device copy {copy_gbs:.0f} GB/s (read + write)", flush=True)
        if args.sweep:
            res["sweep"] = sweep(timer, args.formats, args.sweep_rows, shapes)
        if not args.skip_products:
            res["products"] = products(timer, args.formats, args.rows, copy_gbs, shapes)
    text = json.dumps(res, default=str)
    if args.json:
        Path(args.json).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
