"""Registers and spills of the fused FFT kernel (fft_fused.py) as ptxas builds it for sm_90a,
without a GPU: the kernel is compiled by Triton for a stated target and its PTX handed to the
ptxas bundled with Triton (-v), whose counts are printed per length, op and dot variant.

    python benchmarks/tuning/fft_regs.py [--n 1000 2048 4096] [--ops rfft fft irfft ifft]
        [--dot ieee tf32x3] [--rows 96000] [--points P] [--warps W] [--chunk C] [--arch 90]

The launch arguments are those fft.py gives the kernel for a batch of ``--rows`` rows (the
chunk, rows a program and warps from fft_fused's tables, or the overrides given). Spill bytes
are per thread (ptxas's "bytes spill stores / loads"); a spill-free build says 0.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.pop("TRITON_INTERPRET", None)  # a real compile, not the interpreter
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import pygpukit as gp
from pygpukit.array import GPUArray
from pygpukit.backends.triton_kernels import fft_fused as tff

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
_LOADS = {"fft": 0, "ifft": 0, "rfft": 1, "irfft": 2}


def launch_args(op: str, n: int, rows: int) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """(kernel, args, constexprs) of the fused launch of ``op`` at length n over ``rows`` rows
    (host tables on the CPU device; nothing runs)."""
    got: list[Any] = []
    real_launch, real_interp = tff.launch, tff.interpreting
    tff.launch = lambda k, grid, *a, **c: got.append((k, a, c))
    tff.interpreting = lambda: False
    try:
        n_in = n // 2 + 1 if op == "irfft" else n
        x = gp.from_numpy(np.zeros((1, 2 * n), np.float32), device="cpu")
        src = tff.Operand(x, (0, 0, 2 * n), 1 if op == "rfft" else 2)
        tff.fused_transform(
            src, tff.Operand(x, (0, 0, 2 * n), 2), rows, (1, 1), n=n,
            inverse=op in ("ifft", "irfft"), load=_LOADS[op], n_in=n_in, n_log=n,
            n_out=n // 2 + 1 if op == "rfft" else n, real_out=op == "irfft", scale=1.0,
        )  # fmt: skip
    finally:
        tff.launch, tff.interpreting = real_launch, real_interp
    return got[0]


def ptxas_counts(kernel: Any, args: tuple[Any, ...], consts: dict[str, Any], arch: int) -> dict:
    """Compile for sm_<arch>a and return ptxas's registers, spill stores/loads, stack bytes."""
    consts = dict(consts)
    warps = consts.pop("num_warps", 4)
    sig: dict[str, str] = {}
    vals = iter(args)
    for name in kernel.arg_names:
        if name in consts:
            sig[name] = "constexpr"
            continue
        a = next(vals)
        sig[name] = "*fp32" if isinstance(a, GPUArray) else "i32" if isinstance(a, int) else "fp32"
    src = ASTSource(kernel, sig, consts)
    ck = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    with tempfile.TemporaryDirectory() as d:
        ptx = Path(d) / "k.ptx"
        ptx.write_text(ck.asm["ptx"])
        cmd = [str(PTXAS), f"-arch=sm_{arch}a", "-v", str(ptx), "-o", str(Path(d) / "k.o")]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    txt = out.stdout + out.stderr

    def num(pat: str) -> int:
        m = re.search(pat, txt)
        return int(m.group(1)) if m else -1

    return {
        "warps": warps,
        "regs": num(r"Used (\d+) registers"),
        "spill_st": num(r"(\d+) bytes spill stores"),
        "spill_ld": num(r"(\d+) bytes spill loads"),
        "stack": num(r"(\d+) bytes stack frame"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", nargs="+", type=int, default=[1000, 2048, 4096])
    p.add_argument("--ops", nargs="+", default=["rfft", "fft"], choices=list(_LOADS))
    p.add_argument("--dot", nargs="+", default=list(tff.DOTS), choices=list(tff.DOTS))
    p.add_argument("--rows", type=int, default=96000)
    p.add_argument("--points", type=int, default=None, help="fft_fused.FUSED_POINTS")
    p.add_argument("--warps", type=int, default=None, help="fft_fused.FUSED_WARPS")
    p.add_argument("--chunk", type=int, default=None, help="fft_fused.CHUNK")
    p.add_argument("--arch", type=int, default=90)
    args = p.parse_args(argv)
    tff.FUSED_POINTS, tff.FUSED_WARPS = args.points, args.warps
    if args.chunk is not None:
        tff.CHUNK = args.chunk
    for n in args.n:
        for op in args.ops:
            for dot in args.dot:
                tff.DOT = dot
                kernel, a, c = launch_args(op, n, args.rows)
                r = ptxas_counts(kernel, a, c, args.arch)
                tile = " ".join(f"{k}={c[k]}" for k in ("N1", "N2", "Q1", "Q2", "QC", "ROWS"))
                print(
                    f"{op:>5} n={n:<5} {dot:>6} {tile} warps={r['warps']}: {r['regs']} regs, "
                    f"spill {r['spill_st']} B stores / {r['spill_ld']} B loads, "
                    f"stack {r['stack']} B",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
