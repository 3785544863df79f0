"""gp.fft (Triton, fp32) against torch.fft (cuFFT) in the same run.

    python benchmarks/fft.py [--json results.json] [--quick] [--rounds 20]
        [--dot ieee tf32x3] [--paths fused passes] [--points 1024 2048] [--n 400 2048]
        [--chunk 64 16] [--warps 4 8] [--pairs 1 0] [--backend triton native]
        [--dtype float64]

--dtype float64 times float64 / complex128 inputs against torch.fft in double precision
(cuFFT's Z2Z / D2Z); the fp32 knobs below (--dot, --paths, --points, ...) do not apply there:
float64 runs the Stockham passes and Bluestein only, on Triton, or the native kernels at their
lengths.

Cases: batched real frames as in speech features (32 x 3000 frames of n = 400, 512 and 2048,
and of 1000 and 4096, the other lengths with a factor padded to 64; rfft and fft), a batched
Bluestein length (n = 401), and long 1-D transforms (2**16, 2**20, 2**22 and the prime
1000003). Each case times gp.fft and torch.fft on one stream with CUDA
events, the L2 flushed before each round, median of --rounds (pygpukit.benchmark.timing, as
the other benchmarks), and reports GB/s (one read of the input and one write of the result,
the minimum traffic) and gp's speed relative to torch (torch time / gp time; > 1: gp faster),
plus gp's relative error against float64 numpy.fft on a few rows. The device's copy rate is
measured in the same run as the bandwidth ceiling. Without torch the torch columns stay empty;
without a GPU the script says so and exits (--quick shrinks the batches for a smoke run).
The last line of output is one JSON object (also written to --json).

Variants, all in one process and one table each: --dot, the tl.dot input precision of the FFT
kernels (fft_fused.DOT, env PYGPUKIT_FFT_DOT; default both "ieee" and "tf32x3"); --paths,
"fused" (the one-kernel path for lengths N1 N2 with both factors <= 64, the default) and/or
"passes" (the fused path off: every length through the Stockham passes); --points, the
fused kernel's points a program (fft_fused.FUSED_POINTS; default its table); --chunk, the
chunk width of products along a factor padded to 64 (fft_fused.CHUNK; 64: whole products;
default its value); --warps, the fused kernel's warps a program (fft_fused.FUSED_WARPS;
default its table); --pairs, rfft of the even lengths fft_plan.real_pairs picks as a complex
half-length transform plus an untangling step (1, the default) or as a real transform (0)
(fft_fused.PAIRS, env PYGPUKIT_FFT_PAIRS); --backend, the backend the FFT ops are routed to
("triton" or "native", the kernels of native/src/fft: lengths they do not serve are skipped
for it; default: the routing table's choice, which sends the lengths native serves there, so
tune the Triton knobs above on them with --backend triton). Each case's input, torch time and
copy rate are shared by all variants.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import pygpukit as gp
from pygpukit.benchmark.report import emit


@dataclass(frozen=True)
class Case:
    op: str  # "rfft" or "fft"
    batch: int
    n: int
    note: str = ""
    double: bool = False  # float64 / complex128 input


def cases(quick: bool, lengths: list[int] | None = None, double: bool = False) -> list[Case]:
    """The default cases; ``lengths`` (--n) adds batched frames of other lengths."""
    frames = 32 * 3000 if not quick else 64
    long = [1 << 16, 1 << 20, 1 << 22, 1000003] if not quick else [1 << 12, 4099]
    out: list[Case] = []
    extra = [n for n in lengths or () if n not in (400, 512, 1000, 2048, 4096, 401, *long)]
    for n in sorted({400, 512, 1000, 2048, 4096, *extra}):
        note = "speech frames" if n in (400, 512, 2048) else "frames"
        out += [Case("rfft", frames, n, note), Case("fft", frames, n, note)]
    out.append(Case("rfft", frames, 401, "Bluestein"))
    out += [Case("fft", 1, n, "1-D") for n in long]
    out.append(Case("rfft", 1, long[-2], "1-D"))
    return [Case(c.op, c.batch, c.n, c.note, double) for c in out]


def _input(c: Case, rng: np.random.Generator, device: str) -> gp.GPUArray:
    real = np.float64 if c.double else np.float32
    x = rng.standard_normal((c.batch, c.n), dtype=real)
    if c.op == "fft":
        y = rng.standard_normal((c.batch, c.n), dtype=real)
        z = (x + 1j * y).astype(np.complex128 if c.double else np.complex64)
        return gp.from_numpy(z, device=device)
    return gp.from_numpy(x, device=device)


def _bytes(c: Case) -> int:
    n_out = c.n // 2 + 1 if c.op == "rfft" else c.n
    w = 8 if c.double else 4  # bytes of a real value
    return c.batch * (c.n * (w if c.op == "rfft" else 2 * w) + n_out * 2 * w)


def _rel_error(c: Case, x: gp.GPUArray, y: gp.GPUArray) -> float:
    rows = min(c.batch, 8)
    xs = x[:rows].to_numpy()
    ref = getattr(np.fft, c.op)(xs.astype(np.complex128 if c.op == "fft" else np.float64))
    got = y[:rows].to_numpy()
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


@dataclass(frozen=True)
class Variant:
    dot: str  # fft_fused.DOT
    path: str  # "fused" or "passes"
    points: int | None  # fft_fused.FUSED_POINTS (None: its table)
    chunk: int | None = None  # fft_fused.CHUNK (None: its default)
    warps: int | None = None  # fft_fused.FUSED_WARPS (None: its table)
    pairs: bool | None = None  # fft_fused.PAIRS (None: its default)
    backend: str | None = None  # the FFT ops' route (None: the table's choice)

    @property
    def name(self) -> str:
        pts = "" if self.points is None else f" points={self.points}"
        ch = "" if self.chunk is None else f" chunk={self.chunk}"
        wp = "" if self.warps is None else f" warps={self.warps}"
        pr = "" if self.pairs is None else f" pairs={int(self.pairs)}"
        be = "" if self.backend is None else f" backend={self.backend}"
        return f"dot={self.dot} path={self.path}{pts}{ch}{wp}{pr}{be}"

    def serves(self, c: Case) -> bool:
        """False for a length the forced backend does not serve (native: 7-smooth lengths up to
        its tops, any to half of them, even for rfft)."""
        if self.backend != "native":
            return True
        from pygpukit.backends.native import fft as native_fft

        try:
            native_fft._plan(c.op, c.n, c.op != "fft", c.double)
        except ValueError:
            return False
        return True

    def apply(self) -> None:
        from pygpukit.backends.triton_kernels import fft_fused
        from pygpukit.routing import overrides

        # Only the timed ops' rules change (other routes the caller set stay).
        overrides.set_route(fft=self.backend or "auto", rfft=self.backend or "auto")

        fft_fused.DOT = self.dot
        fft_fused.FUSED = self.path == "fused"
        fft_fused.FUSED_POINTS = self.points
        if self.chunk is not None:  # None only when --chunk is not given
            fft_fused.CHUNK = self.chunk
        fft_fused.FUSED_WARPS = self.warps
        if self.pairs is not None:
            fft_fused.PAIRS = self.pairs


def run_case(
    c: Case,
    timer: Any,
    rounds: int,
    rng: np.random.Generator,
    device: str = "cuda:0",
    variants: tuple[Variant, ...] = (),
) -> list[dict[str, Any]]:
    """One case's row per variant (none given: as configured); timer: a DeviceTimer (its
    ``torch`` is None without torch). The input and the torch time are shared."""
    x = _input(c, rng, device)
    fn = getattr(gp.fft, c.op)
    base: dict[str, Any] = {"op": c.op, "batch": c.batch, "n": c.n, "note": c.note}
    torch = timer.torch
    if torch is not None:
        tx = torch.from_dlpack(x)
        tfn = getattr(torch.fft, c.op)
        tt = timer.median_seconds(lambda: tfn(tx), rounds=rounds)
        base["torch_us"] = tt * 1e6
        base["torch_gbs"] = _bytes(c) / tt / 1e9
    rows = []
    for v in variants or (None,):
        if v is not None:
            if not v.serves(c):
                continue
            v.apply()
        row = dict(base, variant=None if v is None else v.name)
        y = fn(x)  # compiles, builds the plan, and is the result checked below
        row["rel_error"] = _rel_error(c, x, y)
        t = timer.median_seconds(lambda y=y: fn(x, out=y), rounds=rounds)
        row["gp_us"] = t * 1e6
        row["gp_gbs"] = _bytes(c) / t / 1e9
        if "torch_us" in base:
            row["speed_vs_torch"] = base["torch_us"] / row["gp_us"]
        rows.append(row)
        del y
    return rows


def _fmt(v: Any, spec: str, width: int = 0) -> str:
    return "-".rjust(width) if v is None else format(v, spec)


def report(rows: list[dict[str, Any]], copy_gbs: float) -> None:
    print(f"device copy rate {copy_gbs:.0f} GB/s (read + write)")
    head = f"{'op':>5} {'batch':>6} {'n':>8} {'note':>14} {'gp us':>10} {'GB/s':>7} {'%copy':>6}"
    print(head + f" {'torch us':>10} {'GB/s':>7} {'vs torch':>8} {'rel err':>8}")
    for r in rows:
        print(
            f"{r['op']:>5} {r['batch']:>6} {r['n']:>8} {r['note']:>14} {r['gp_us']:>10.1f} "
            f"{r['gp_gbs']:>7.0f} {100 * r['gp_gbs'] / copy_gbs:>5.0f}% "
            f"{_fmt(r.get('torch_us'), '>10.1f', 10)} {_fmt(r.get('torch_gbs'), '>7.0f', 7)} "
            f"{_fmt(r.get('speed_vs_torch'), '>7.2f', 7)}x {r['rel_error']:>8.1e}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--quick", action="store_true", help="small batches (a smoke run)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--dot", nargs="+", default=["ieee", "tf32x3"], choices=["ieee", "tf32x3"])
    p.add_argument("--paths", nargs="+", default=["fused"], choices=["fused", "passes"])
    p.add_argument("--points", nargs="+", type=int, default=None, help="fused points a program")
    p.add_argument("--n", nargs="+", type=int, default=None,
                   help="only these lengths (others become batched frames cases)")  # fmt: skip
    p.add_argument("--chunk", nargs="+", type=int, default=None, help="fused chunk width")
    p.add_argument("--warps", nargs="+", type=int, default=None, help="fused warps a program")
    p.add_argument("--pairs", nargs="+", type=int, default=None, choices=[0, 1],
                   help="rfft through real pairs (1) or not (0)")  # fmt: skip
    p.add_argument("--backend", nargs="+", default=None, choices=["triton", "native"],
                   help="route the FFT ops to this backend")  # fmt: skip
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = p.parse_args(argv)
    if not gp.is_cuda_available():
        print("benchmarks/fft.py: no CUDA device; nothing to time")
        return 0
    from pygpukit.benchmark.timing import DeviceTimer

    timer = DeviceTimer(0)
    rng = np.random.default_rng(0)
    copy_gbs = timer.copy_rate(1 << 28 if args.quick else 1 << 30)
    points: list[int | None] = list(args.points) if args.points else [None]
    chunks: list[int | None] = list(args.chunk) if args.chunk else [None]
    warps: list[int | None] = list(args.warps) if args.warps else [None]
    pairs: list[bool | None] = [bool(v) for v in args.pairs] if args.pairs else [None]
    backends: list[str | None] = list(args.backend) if args.backend else [None]
    variants = tuple(
        Variant(*v)
        for v in itertools.product(args.dot, args.paths, points, chunks, warps, pairs, backends)
    )
    rows: list[dict[str, Any]] = []
    for c in cases(args.quick, args.n, args.dtype == "float64"):
        if args.n is not None and c.n not in args.n:
            continue
        for r in run_case(c, timer, args.rounds, rng, variants=variants):
            rows.append(r)
            vs = _fmt(r.get("speed_vs_torch"), ".2f")
            print(
                f"{c.op} batch {c.batch} n {c.n} [{r['variant']}]: {r['gp_us']:.1f} us, "
                f"vs torch {vs}x, rel err {r['rel_error']:.1e}",
                flush=True,
            )
    for v in variants:
        print(f"\n== {v.name}")
        report([r for r in rows if r["variant"] == v.name], copy_gbs)
    props = gp.get_device_properties(0)
    result = {
        "device": str(props.get("name", "cuda:0")),
        "dtype": args.dtype,
        "torch": None if timer.torch is None else str(timer.torch.__version__),
        "copy_gbs": copy_gbs,
        "cases": rows,
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
