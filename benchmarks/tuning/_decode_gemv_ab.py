"""decode_ab.py's experiments on the decode GEMVs of the step: sites (the Triton GEMV's tile at
one product), early-tile (its first weight tile before the wait or after, product by product),
product-leave-out (one product class's launches skipped), quant-sites and quant-norm (the
native quantized GEMV's early launch and the RMSNorm read into it). decode_ab.py's docstring
says what each measures."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from benchmarks._models import product_class
from benchmarks.tuning._decode_rounds import rounds, setting
from pygpukit.backends.triton_kernels import gemv_dense

__all__ = ["GEMV_EXPERIMENTS"]

# (N, K, gated) of a product -> (output columns a program, warps, K tile); N is the output
# columns (the gated form's per half). Tiles measured before against the rule (BENCHMARKS.md,
# "Batch 1: where the step's time goes, and the cache write and attention launched early"):
# Llama-3.2-1B o_proj (4, 8, 2048) and (8, 8, 2048), gate/up (4, 4, 1024), down (4, 16, 4096);
# Qwen3-8B o_proj (4, 16, 4096), gate/up (4, 8, 4096), down (4, 16, 4096); the qkv and
# lm_head plain rule on both.
_SITES: dict[str, dict[str, dict[tuple[int, int, bool], tuple[int, int, int]]]] = {
    # Measured before (BENCHMARKS.md): Llama-3.2-1B o_proj (2, 4, 1024), (4, 2, 1024), gate/up
    # (4, 4, 2048), down (4, 4, 1024), (2, 8, 2048), qkv (2, 8, 2048), (8, 8, 2048); Qwen3-8B
    # qkv (4, 8, 2048), o_proj (4, 16, 4096), (2, 8, 2048), gate/up (4, 8, 4096), down
    # (4, 16, 4096), (8, 8, 2048); the RMSNorm form's earlier rule (4 columns, K / 256 warps)
    # at the qkv product and the lm_head, and at the lm_head alone, on both. Last: the down
    # product's (4, 16, 4096) on both (a rule from K 8192 on; slower on both, not taken).
    "llama-3.2-1b": {"down (4, 16, 4096)": {(2048, 8192, False): (4, 16, 4096)}},
    "qwen3-8b": {"down (4, 16, 4096)": {(4096, 12288, False): (4, 16, 4096)}},
}  # fmt: skip


def _sites(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    shipped = gemv_dense.tile

    def rule(table: dict[tuple[int, int, bool], tuple[int, int, int]]) -> Callable[[], None]:
        def tile(k: int, gated: bool, n: int = 0, norm: bool = False) -> Any:
            return table.get((n, k, gated)) or shipped(k, gated, n, norm)

        return setting((gemv_dense, "tile", tile))

    variants = [("shipped", setting((gemv_dense, "tile", shipped)))]
    variants += [(name, rule(t)) for name, t in _SITES.get(args.model, {}).items()]
    try:
        rounds(model, prompt, args, variants)
    finally:
        gemv_dense.tile = shipped


def _quant_sites(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    import importlib

    from pygpukit.backends.native import gemv as native_gemv

    ops_gemv = importlib.import_module("pygpukit.ops.gemv")  # the attribute is gp.gemv
    shipped = native_gemv._launch, native_gemv.PDL_LAUNCH, ops_gemv.QUANT_GATED_GEMV
    plain: set[str] = set()  # product classes launched plainly in the variant that runs
    seen: set[str] = set()

    def run(fmt: str, x: Any, w: Any, w_row_bytes: int, n: int, *a: Any, **kw: Any) -> Any:
        site = product_class(args.cfg, n, x.shape[-1])
        seen.add(site)
        early = native_gemv.PDL_LAUNCH
        native_gemv.PDL_LAUNCH = early and site not in plain and "all" not in plain
        try:
            return shipped[0](fmt, x, w, w_row_bytes, n, *a, **kw)
        finally:
            native_gemv.PDL_LAUNCH = early

    def variant(off: set[str], gated: bool | None) -> Callable[[], None]:
        def apply() -> None:
            plain.clear()
            plain.update(off)
            ops_gemv.QUANT_GATED_GEMV = gated

        return apply

    native_gemv._launch = run
    try:
        model.drop_step_graphs()
        model.generate(prompt, 8, temperature=0, stop_token_ids=())  # which products run natively
        sites = [s for s in ("qkv", "o_proj", "gate/up", "down", "lm_head") if s in seen]
        print(f"{args.model} {args.quantize}: native GEMV products {sorted(seen)}", flush=True)
        variants = [("early launch everywhere (shipped)", variant(set(), None)),
                    ("early launch nowhere", variant({"all"}, None))]  # fmt: skip
        variants += [(f"early launch off at {s}", variant({s}, None)) for s in sites]
        variants += [("gate/up in one launch", variant(set(), True)),
                     ("gate/up in one launch, plain", variant({"gate/up"}, True)),
                     ("gate/up in two launches", variant(set(), False))]  # fmt: skip
        rounds(model, prompt, args, variants)
    finally:
        native_gemv._launch, native_gemv.PDL_LAUNCH, ops_gemv.QUANT_GATED_GEMV = shipped


def _quant_norm(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    import importlib

    ops_gemv = importlib.import_module("pygpukit.ops.gemv")  # the attribute is gp.gemv
    shipped = ops_gemv.QUANT_NORM_GEMV
    try:
        knob = (ops_gemv, "QUANT_NORM_GEMV")
        rounds(model, prompt, args, [
            ("RMSNorm read in (shipped rule)", setting((*knob, None))),
            ("RMSNorm apart", setting((*knob, False))),
            ("RMSNorm read in at every size", setting((*knob, True))),
        ])  # fmt: skip
    finally:
        ops_gemv.QUANT_NORM_GEMV = shipped


def _early_tile(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    shipped = gemv_dense.early_tile
    classes = ("qkv", "o_proj", "gate/up", "down")

    def flipped(*names: str) -> Callable[[], None]:  # the shipped choice turned at these products
        def rule(n: int, k: int, gated: bool, norm: bool = False) -> bool:
            return shipped(n, k, gated, norm) != (product_class(args.cfg, n, k) in names)

        return setting((gemv_dense, "early_tile", rule))

    every = setting((gemv_dense, "early_tile", lambda *_product: True))
    variants = [("shipped", setting((gemv_dense, "early_tile", shipped))),
                ("every product early", every)]  # fmt: skip
    variants += [(f"flipped at {name}", flipped(name)) for name in classes]
    variants.append(("flipped at o_proj and gate/up", flipped("o_proj", "gate/up")))
    try:
        rounds(model, prompt, args, variants)
    finally:
        gemv_dense.early_tile = shipped


def _product_leave_out(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    real = gemv_dense.launch
    skip: set[str] = set()

    def launch(kernel: Any, grid: Any, *a: Any, **c: Any) -> Any:
        if product_class(args.cfg, a[5], c["K"]) in skip:  # a[5]: the product's N
            return None
        return real(kernel, grid, *a, **c)

    def without(site: str | None) -> Callable[[], None]:
        def apply() -> None:
            skip.clear()
            skip.update({site} if site else set())

        return apply

    sites = ("qkv", "o_proj", "gate/up", "down", "lm_head")
    variants = [("nothing left out", without(None))]
    variants += [(f"without {s}", without(s)) for s in sites]
    gemv_dense.launch = launch
    try:
        rounds(model, prompt, args, variants)
    finally:
        gemv_dense.launch = real


GEMV_EXPERIMENTS: dict[str, Callable[[Any, list[list[int]], argparse.Namespace], None]] = {
    "sites": _sites, "early-tile": _early_tile, "product-leave-out": _product_leave_out,
    "quant-sites": _quant_sites, "quant-norm": _quant_norm,
}  # fmt: skip
