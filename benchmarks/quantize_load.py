"""Loading a model quantized at load (load_model(..., quantize=...)): how long it takes.

    python benchmarks/quantize_load.py [--model qwen3-8b] [--formats int4 nvfp4 fp8]
                                       [--weight 12288x4096] [--json OUT]

1. One weight of --weight (N x K, random bf16 values) quantized by gp.quantize_weight on the
   GPU (the routed Triton kernels, from the NumPy array: upload included) and on the host (the
   NumPy reference, device="cpu": what every load ran before the device path), same run: seconds
   and ns a value. The two results are compared bit for bit.
2. The --model config (benchmarks/_models.py, random bf16 weights made on the host) loaded
   dense (bfloat16) and quantized at load in each format: wall seconds from the host tensors to
   a model on the GPU (synchronized), and the weights' device bytes.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))  # _models

import numpy as np
from _models import CONFIGS, RandomBf16, random_model

import pygpukit as gp


def _bytes(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a.to_numpy()).view(np.uint8)


def _one_weight(n: int, k: int, fmt: str) -> dict[str, Any]:
    w = RandomBf16({"w": (n, k)}).tensor("w")
    dev = gp.device("cuda:0")
    gp.quantize_weight(w[:16], fmt, device=dev)  # compile / load the kernels
    t0 = time.perf_counter()
    qd = gp.quantize_weight(w, fmt, device=dev)
    gp.synchronize()
    t_dev = time.perf_counter() - t0
    t0 = time.perf_counter()
    qh = gp.quantize_weight(w, fmt, device="cpu")
    t_host = time.perf_counter() - t0
    same = qd.global_scale == qh.global_scale and all(
        np.array_equal(_bytes(a), _bytes(b))
        for a, b in ((qd.data, qh.data), (qd.scales, qh.scales))
    )
    return {"format": fmt, "shape": [n, k], "device_s": t_dev, "host_s": t_host,
            "device_ns_a_value": t_dev / (n * k) * 1e9, "host_ns_a_value": t_host / (n * k) * 1e9,
            "same_bits": bool(same)}  # fmt: skip


def _load(name: str, quantize: str | None) -> dict[str, Any]:
    gc.collect()
    t0 = time.perf_counter()
    model, _, _ = random_model(name, quantize=quantize)
    gp.synchronize()
    secs = time.perf_counter() - t0
    nbytes = model.weights.nbytes()
    del model
    gc.collect()
    return {"quantize": quantize or "bfloat16", "seconds": secs, "weight_bytes": nbytes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen3-8b", choices=sorted(CONFIGS))
    p.add_argument("--formats", nargs="+", default=["int4", "nvfp4", "fp8"])
    p.add_argument("--weight", default="12288x4096", help="N x K of the one-weight comparison")
    p.add_argument("--skip-model", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    n, k = (int(v) for v in args.weight.lower().split("x"))
    out: dict[str, Any] = {"device": gp.device("cuda:0").properties.get("name"), "weight": [],
                           "model": []}  # fmt: skip
    for fmt in args.formats:
        r = _one_weight(n, k, fmt)
        out["weight"].append(r)
        ratio = r["host_s"] / r["device_s"]
        print(f"{fmt:6} {n}x{k}: device {r['device_s']:.3f} s ({r['device_ns_a_value']:.2f} ns "
              f"a value), host {r['host_s']:.2f} s ({r['host_ns_a_value']:.1f} ns a value), "
              f"{ratio:.0f}x; same bits: {r['same_bits']}", flush=True)  # fmt: skip
    if not args.skip_model:
        for q in [None, *args.formats]:
            r = _load(args.model, q)
            out["model"].append(r)
            print(f"{args.model} {r['quantize']:8}: loaded in {r['seconds']:.1f} s, weights "
                  f"{r['weight_bytes']} bytes", flush=True)  # fmt: skip
    text = json.dumps(out)
    if args.json:
        Path(args.json).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
