"""Batch-1 decode with decode-step changes turned off again, in one process, on a benchmark
model shape with random bf16 weights (quantized at load with --quantize).

    python benchmarks/tuning/decode_ab.py [--model llama-3.2-1b|qwen3-8b|llama-3.1-8b] [--new 256]
        [--experiment tiles|pdl|sites|overlap|prefetch|append|qkv-write|splits|length-chunks|
         lean|leave-out|early-loads|attention-loop|attention-positions|product-leave-out|
         early-tile|ramp|tails|host|first-run]
        [--context N] [--at P]
    python benchmarks/tuning/decode_ab.py --quantize int4|fp8|nvfp4 --experiment quant-sites
    python benchmarks/tuning/decode_ab.py --quantize int4|fp8|nvfp4 --experiment quant-norm

Experiments:
- tiles (the default): the graph-replayed step's device time (50 replays back to back, two
  alternating rounds) and generate's decode tok/s at steps_per_sync 1 and 8 for
  - "before": the decode GEMV's 1024-value K tiles at every K (gemv_dense.WIDE_K out of reach)
    and RoPE on the queries as its own kernel (gp.rope before gp.kv_cache_write, at the same
    positions);
  - "wide K tiles": the GEMV's [4, 2048] tiles from K = 4096 on, queries still rotated apart;
  - "now": the shipped tree (also the queries rotated inside gp.kv_cache_write).
- pdl: programmatic dependent launch of the cache write and of decode attention (their
  PDL_LAUNCH knobs) off / one of them / both (shipped): the graph-replayed step's device time
  and decode tok/s at steps_per_sync 32 measured as benchmarks/decode_e2e.py does ((median
  wall time of 256 tokens - that of 1) over the tokens between), two alternating rounds,
  tokens checked against the first variant's. Attention releases the next kernel in every
  variant, as the shipped tree does.
- sites: the decode GEMV's tile (output columns a program, warps, K tile) changed at one
  product of the step at a time (gemv_dense.tile, keyed by the product's N, K and gated form),
  against the shipped rule, measured as prefetch and the others below. In the model a GEMV
  launched early streams its first weight tile while the kernel before it runs, so the best
  tile there can differ from tune_gemv.py's isolated chains (a full-K tile puts a program's
  whole weight slice in flight at once).
- overlap: decode tok/s at steps_per_sync 32 with the runs pipelined (the next run enqueued
  behind the current one before the host waits for its tokens: generation.run_steps, shipped)
  and with each run's tokens waited for before the next is enqueued (DecodeRun.can_resume
  made to refuse), beside the device time a step takes inside the 32-step graph at cache
  positions --at..--at + 32 (128-160 by default, the middle of the 256 new tokens; the rate
  with no host time at all), two alternating rounds.
- prefetch, append, qkv-write, splits, length-chunks, lean, ramp, early-loads,
  attention-loop, early-tile (also sites and leave-out): two alternating rounds of each
  variant, each measured alike (decode tok/s as in pdl, the 1-step graph's device time over 50
  replays, a step inside the 32-step graph at cache positions --at..--at + 32 as in overlap,
  tokens checked against the first variant's):
  - prefetch: the cache write's positions and decode attention's lengths loaded before their
    programs wait on the kernel ahead (kv_write.PREFETCH_POSITIONS, attention_decode.
    PREFETCH_LENGTHS: shipped) or after;
  - append: the decode step's cache write and attention in one launch
    (gp.sdpa_decode_append: decode_forms.APPEND_ATTENTION), launched early
    (attention_decode.PDL_LAUNCH) or plainly, or in two (kv_cache_write, then sdpa_decode,
    both launched early; shipped); the one launch normalises Qwen3's heads with its sum of
    squares in another order, so its tokens may differ there (Llama's are the same bits);
  - qkv-write: a decode step's qkv product, RoPE on q and k and the cache write in one
    launch (gp.rmsnorm_qkv_rope_write: decode_forms.QKV_ROPE_WRITE) or in two
    (gp.rmsnorm_linear, then gp.kv_cache_write: shipped); the same bits either way (Llama,
    Qwen2: no head norms; Qwen3 takes the two launches in both variants);
  - splits: decode attention's key splits at batch 1 (the few-programs class's
    FEW_MIN_SPLIT_KEYS: fewer, longer splits, or more, shorter ones);
  - length-chunks: decode attention's keys a split takes following the length (the length's
    blocks spread over the splits: _support/scratch.LENGTH_CHUNKS, shipped) or the cache's
    capacity, with or without one split up to FEW_ONE_SPLIT_KEYS keys, with splits of at
    least FEW_MIN_SPLIT_KEYS or 256 keys; with --context (a cache of that many slots, as a
    chat session's spans the model's context) and --at (where the 32-step graph's step is
    timed) it shows what a cache longer than its sequence costs;
  - lean: greedy runs whose steps read their ids from the step before's tokens and advance
    the positions only where the model reads them (decode_loop.LEAN_STEPS, shipped) or copy
    and add each step;
  - ramp: a run's write marks (and positions) for all its steps made by one add at its start
    (decode_loop.RAMP_MARKS, shipped) or by one add a step;
  - early-loads: the RMSNorm-read GEMV's norm weight loaded before the wait on the kernel
    ahead (gemv_dense.NORM_WEIGHT_EARLY, shipped) or after it, each with the cache write's
    angles (cos/sin at the position) and head-norm weights loaded before its wait
    (kv_write.ANGLES_EARLY, shipped) or after it; the same bits in every variant;
  - attention-loop: batch-1 decode attention (the few-programs class) with a split's key
    blocks in one masked, pipelined loop (attention_decode.FEW_ONE_LOOP, shipped) or in two
    (the blocks every row sees, then the masked tail, whose loads start when the first loop
    ends), and the one loop with fewer pipeline stages and 32- or 128-key blocks
    (FEW_BLOCK_N, FEW_NUM_STAGES);
  - early-tile: each decode GEMV's first weight tile loaded before its wait on the kernel
    ahead or after it: the shipped rule (gemv_dense.early_tile), every product's tile early,
    and the shipped choice flipped at one product class (qkv, o_proj, gate/up, down) or at
    o_proj and gate/up; the same bits in every variant; the dense (Triton) GEMV's products
    only, so not with --quantize.
- quant-sites (with --quantize: the weights quantized at load, each product but a tied
  embedding's lm_head a native decode GEMV): measured as prefetch and the others above, the
  native GEMV's early launch (backends/native/gemv.PDL_LAUNCH) on at every product (shipped),
  off at every product, and off at one product class at a time (qkv, output projection,
  gate/up, down, lm_head: those a warm-up generate saw run on the native GEMV), then
  the gated MLP's gate/up product in one launch and in two (ops/gemv.QUANT_GATED_GEMV; the
  shipped rows leave it to QUANT_GATED_FORMATS: one launch for int4), the one launched early
  and not. In back-to-back chains of one product the early launch made the GEMV slower (up to
  17%); inside the step it measured faster as a whole; this says which products gain and which
  lose. The one-launch gate/up rounds silu(g) * u once, so its tokens may differ.
- quant-norm (with --quantize): the pre-norm block's RMSNorm read into the quantized GEMV after
  it (gp.rmsnorm_linear, op rmsnorm_gemv_<format>) by the shipped rule (ops/gemv.QUANT_NORM_GEMV
  None: the qkv product, not a large untied lm_head: QUANT_NORM_MAX_N), run apart
  (QUANT_NORM_GEMV False: gp.rmsnorm, then the GEMV), or read in at every size (True: the
  lm_head too). The norm form's rstd sums its squares in another order, so tokens may differ.
- leave-out: measured as prefetch and the others above, with kernel families taken out of
  the step (the RMSNorm before the MLP, the cache write, decode attention, the last two, or
  all three), on the two-launch form of the write and attention (APPEND_ATTENTION off),
  otherwise the tree as it is (its PDL_LAUNCH knobs included): the tokens are meaningless, the
  step's time bounds what any fusion or speed-up of those kernels can gain.
- tails: the kept 32-step greedy run's graphs of 1, 2, 4, 8 and 16 steps recorded (the time
  each takes and the memory it keeps), then the device time of runs of 1 to 31 steps from
  cache position --at (made of those graphs, the tokens' copy to the host included) against
  the whole 32-step graph's, which is what a shorter run replayed before.
- host: the median wall time of greedy generate at 32 steps a sync for 2 to --new new tokens,
  less that of 1 new token (the prefill's), against as many steps at the device time of a step
  inside the 32-step graph: the rest is what a generation's decode costs beyond its steps
  (its host work at the start and the end, the runs' boundaries, the short runs' graphs).
- first-run: measured as ramp (decode tok/s from 7 repeats at least), generate's first run
  enqueued behind the prefill with the prefill's tokens drawn on the device
  (decode_loop.EARLY_FIRST_RUN, off) or started after the host drew them (shipped).
- attention-positions: measured as prefetch and the others above (decode tok/s from one
  repeat), with a step inside the 32-step graph also from cache positions 16, 64, 128 and 224,
  with batch-1 decode
  attention's few-programs knobs as shipped, its row sums summed a key block instead of once
  after the key loop (attention_decode.FEW_ROW_SUMS_LAST), 1, 2 or 8 warps, 32- or 128-key
  blocks, splits of 64 keys (1 warp; 4 warps with the last split combining, or a combine
  kernel) or 128 keys, and
  with attention left out: what attention costs by the keys it reads, and what a change to its
  key loop gains where.
- product-leave-out: measured alike, with the Triton decode GEMV's launches of one product
  class (qkv, output projection, gate/up, down, lm_head) skipped in every layer: what each
  class costs inside the step, to set beside its bytes at the copy rate (tokens meaningless).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks._models import (
    CONFIGS,
    random_model,
    random_prompts,
    timed_generate,
)
from benchmarks.decode_paths import _step_us
from benchmarks.tuning._decode_gemv_ab import GEMV_EXPERIMENTS
from benchmarks.tuning._decode_rounds import (
    PROMPT_LEN,
    cache_need,
    flag_rounds,
    generate_rate,
    rounds,
    run_step_us,
    setting,
)
from benchmarks.tuning._decode_run_ab import RUN_EXPERIMENTS
from pygpukit import ops
from pygpukit.backends.triton_kernels import attention_decode, gemv_dense, kv_write
from pygpukit.creation import arange

_KV_WRITE = ops.kv_cache_write
_WIDE_K = gemv_dense.WIDE_K


def _kv_write_rope_apart(kc: Any, vc: Any, k: Any, v: Any, p: Any, **kw: Any) -> None:
    """gp.kv_cache_write without its q: the queries rotated first by gp.rope (in place), token
    j of row b at p[b] + j."""
    q = kw.pop("q", None)
    if q is not None:
        qt = q.transpose(0, 2, 1, 3)  # token-major [B, Sq, H, D]
        pos = p.reshape(-1, 1)
        if qt.shape[1] > 1:  # a prompt through the decode path (never inside the step graph)
            pos = ops.add(pos, arange(qt.shape[1], dtype="int32", device=q.device))
        ops.rope(qt, kw["cos"], kw["sin"], pos, out=qt)
    _KV_WRITE(kc, vc, k, v, p, **kw)


def _variant(wide: bool, q_in_write: bool) -> None:
    ops.kv_cache_write = _KV_WRITE if q_in_write else _kv_write_rope_apart  # type: ignore[assignment]
    gemv_dense.WIDE_K = _WIDE_K if wide else 1 << 62


def _pdl(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    variants = {"neither": (False, False), "cache write": (True, False),
                "attention": (False, True), "both (shipped)": (True, True)}  # fmt: skip
    shipped = kv_write.PDL_LAUNCH, attention_decode.PDL_LAUNCH
    first: Any = None
    try:
        for rnd in range(2):
            for name, (write, attn) in variants.items():
                kv_write.PDL_LAUNCH, attention_decode.PDL_LAUNCH = write, attn
                r = generate_rate(model, prompt, args.new, args.repeats)
                model.generate(prompt, 200, temperature=0, stop_token_ids=())
                step = _step_us(model, 1) * 1e6
                first = r["tokens"] if first is None else first
                same = r["tokens"] == first
                print(f"{args.model} round {rnd}: launched early {name:17s} graph step "
                      f"{step:7.1f} us, {r['decode_tok_s']:8.1f} tok/s, repeats equal "
                      f"{r['repeats_equal']}, tokens as the first {same}")  # fmt: skip
    finally:
        kv_write.PDL_LAUNCH, attention_decode.PDL_LAUNCH = shipped


def _overlap(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    from pygpukit.models.decode_loop import DecodeRun

    shipped = DecodeRun.can_resume
    first: Any = None
    try:
        for rnd in range(2):
            for name, pipelined in (("pipelined (shipped)", True), ("waited", False)):
                DecodeRun.can_resume = shipped if pipelined else lambda self, n: False  # type: ignore[method-assign]
                r = generate_rate(model, prompt, args.new, args.repeats)
                first = r["tokens"] if first is None else first
                dev = run_step_us(model, at=args.at)
                print(f"{args.model} round {rnd}: runs {name:20s} {r['decode_tok_s']:8.1f} tok/s, "
                      f"repeats equal {r['repeats_equal']}, tokens as the first "
                      f"{r['tokens'] == first}; a step in the 32-step graph at cache "
                      f"positions {args.at}-{args.at + 32} {dev:7.1f} us "
                      f"({1e6 / dev:7.1f} tok/s)")  # fmt: skip
    finally:
        DecodeRun.can_resume = shipped  # type: ignore[method-assign]


def _prefetch(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    shipped = kv_write.PREFETCH_POSITIONS, attention_decode.PREFETCH_LENGTHS
    on = shipped[0] and shipped[1]
    try:
        rounds(model, prompt, args, [
            (f"positions and lengths before the wait {v}", setting(
                (kv_write, "PREFETCH_POSITIONS", v), (attention_decode, "PREFETCH_LENGTHS", v)))
            for v in (on, not on)
        ])  # fmt: skip
    finally:
        kv_write.PREFETCH_POSITIONS, attention_decode.PREFETCH_LENGTHS = shipped


def _append(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    import pygpukit.models.decode_forms as tr

    shipped = tr.APPEND_ATTENTION, attention_decode.PDL_LAUNCH
    forms = (("in one launch", True, True), ("in one launch, plain", True, False),
             ("in two launches", False, True))  # fmt: skip
    try:
        rounds(model, prompt, args, [
            (f"write + attention {name}",
             setting((tr, "APPEND_ATTENTION", one), (attention_decode, "PDL_LAUNCH", early)))
            for name, one, early in forms
        ])  # fmt: skip
    finally:
        tr.APPEND_ATTENTION, attention_decode.PDL_LAUNCH = shipped


def _qkv_write(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    import pygpukit.models.decode_forms as forms

    shipped = forms.QKV_ROPE_WRITE
    try:
        rounds(model, prompt, args, [
            (f"qkv, RoPE and the cache write in one launch {v}",
             setting((forms, "QKV_ROPE_WRITE", v)))
            for v in (shipped, not shipped)
        ])  # fmt: skip
    finally:
        forms.QKV_ROPE_WRITE = shipped


def _splits(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    shipped = attention_decode.FEW_MIN_SPLIT_KEYS
    try:
        rounds(model, prompt, args, [
            (f"splits of at least {k} keys", setting((attention_decode, "FEW_MIN_SPLIT_KEYS", k)))
            for k in (shipped, 64, 256, 1024)
        ], repeats=1)  # fmt: skip
    finally:
        attention_decode.FEW_MIN_SPLIT_KEYS = shipped


def _length_chunks(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    from pygpukit.backends._support import scratch

    knobs = (
        (scratch, "LENGTH_CHUNKS"),
        (attention_decode, "FEW_ONE_SPLIT_KEYS"),
        (attention_decode, "FEW_MIN_SPLIT_KEYS"),
    )
    shipped = [getattr(m, n) for m, n in knobs]
    variants = (
        ("by the length (shipped)", shipped[0], shipped[1], shipped[2]),
        ("by the length, no one-split reach", True, 0, shipped[2]),
        ("by the length, one split up to 256, splits of at least 256", True, 256, 256),
        ("by the capacity", False, 0, shipped[2]),
    )
    try:
        rounds(model, prompt, args, [
            (f"keys a split {name}",
             setting(*((m, n, v) for (m, n), v in zip(knobs, vals, strict=True))))
            for name, *vals in variants
        ], repeats=1)  # fmt: skip
    finally:
        for (m, n), v in zip(knobs, shipped, strict=True):
            setattr(m, n, v)


def _lean(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    from pygpukit.models import decode_loop

    flag_rounds(model, prompt, args, decode_loop, "LEAN_STEPS", "lean steps")


def _early_loads(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    knobs = ((gemv_dense, "NORM_WEIGHT_EARLY"), (kv_write, "ANGLES_EARLY"))
    shipped = [getattr(m, n) for m, n in knobs]

    def knob(norm_weight: bool, angles: bool) -> Callable[[], None]:
        return setting(*((m, n, v) for (m, n), v in zip(knobs, (norm_weight, angles),
                                                         strict=True)))  # fmt: skip

    variants = [
        ("norm weight before, angles after", knob(True, False)),
        ("norm weight after, angles after", knob(False, False)),
        ("norm weight after, angles before", knob(False, True)),
        ("norm weight before, angles before", knob(True, True)),
    ]
    try:
        rounds(model, prompt, args, variants)
    finally:
        for (m, n), v in zip(knobs, shipped, strict=True):
            setattr(m, n, v)


def _attention_loop(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    ad = attention_decode
    names = ("FEW_ONE_LOOP", "FEW_BLOCK_N", "FEW_NUM_STAGES")
    shipped = [getattr(ad, n) for n in names]

    def knobs(one_loop: bool, block_n: int, stages: int) -> Callable[[], None]:
        return setting(*((ad, n, v) for n, v in zip(names, (one_loop, block_n, stages),
                                                     strict=True)))  # fmt: skip

    variants = [
        ("one loop (shipped)" if shipped[0] else "two loops (shipped)", knobs(*shipped)),
        ("two loops" if shipped[0] else "one loop", knobs(not shipped[0], *shipped[1:])),
        ("one loop, 3 stages", knobs(True, shipped[1], 3)),
        ("one loop, 2 stages", knobs(True, shipped[1], 2)),
        ("one loop, 32-key blocks", knobs(True, 32, shipped[2])),
        ("one loop, 128-key blocks, 2 stages", knobs(True, 128, 2)),
    ]
    try:
        rounds(model, prompt, args, variants)
    finally:
        knobs(*shipped)()


def _no_attention(q: Any, *a: Any, **kw: Any) -> Any:
    """decode attention left out of the step (leave-out, attention-positions): q as its output;
    the tokens are meaningless."""
    return q


def _leave_out(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    import pygpukit.models.decode_forms as tr
    import pygpukit.models.transformer as transformer

    real = {
        name: getattr(transformer.ops, name)
        for name in ("rmsnorm", "kv_cache_write", "sdpa_decode")
    }
    append = tr.APPEND_ATTENTION
    tr.APPEND_ATTENTION = False  # the two-launch form, whose launches can be left out one by one

    def no_rmsnorm(x: Any, w: Any, eps: Any, residual: Any = None, **kw: Any) -> Any:
        return x if residual is None else (x, residual)

    def no_write(*a: Any, **kw: Any) -> None:
        return None

    variants: dict[str, dict[str, Any]] = {
        "nothing": {},
        "the MLP's RMSNorm": {"rmsnorm": no_rmsnorm},
        "the cache write": {"kv_cache_write": no_write},
        "decode attention": {"sdpa_decode": _no_attention},
        "write + attention": {"kv_cache_write": no_write, "sdpa_decode": _no_attention},
        "norm + write + attention": {
            "rmsnorm": no_rmsnorm, "kv_cache_write": no_write, "sdpa_decode": _no_attention,
        },
    }  # fmt: skip

    def patched(patch: dict[str, Any]) -> Callable[[], None]:
        return setting(*((transformer.ops, op, fn) for op, fn in {**real, **patch}.items()))

    try:
        rounds(model, prompt, args, [(f"without {n}", patched(p)) for n, p in variants.items()])
    finally:
        for op, fn in real.items():
            setattr(transformer.ops, op, fn)
        tr.APPEND_ATTENTION = append


def _attention_positions(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    """rounds, with a step inside the 32-step graph also from cache positions 16, 64, 128 and
    224, for batch-1 decode attention's few-programs knobs (row sums, warps, key blocks,
    splits), and with attention left out: how its time grows with the keys."""
    import pygpukit.models.decode_forms as forms
    import pygpukit.models.transformer as transformer

    ad = attention_decode
    real = transformer.ops.sdpa_decode
    append = forms.APPEND_ATTENTION
    forms.APPEND_ATTENTION = False  # the two-launch form: attention alone can be left out
    shipped = {n: getattr(ad, n) for n in (
        "FEW_ROW_SUMS_LAST", "FEW_NUM_WARPS", "FEW_BLOCK_N", "FEW_ONE_SPLIT_KEYS",
        "FEW_MIN_SPLIT_KEYS", "FEW_FUSED_COMBINE")}  # fmt: skip

    def knobs(attention: Callable[..., Any] = real, **changed: Any) -> Callable[[], None]:
        return setting(*((ad, n, changed.get(n, v)) for n, v in shipped.items()),
                       (transformer.ops, "sdpa_decode", attention))  # fmt: skip

    splits64 = {"FEW_ONE_SPLIT_KEYS": 0, "FEW_MIN_SPLIT_KEYS": 64}
    sums_last = not shipped["FEW_ROW_SUMS_LAST"]
    variants = [
        ("shipped", knobs()),
        (f"row sums last {sums_last}", knobs(FEW_ROW_SUMS_LAST=sums_last)),
        ("1 warp", knobs(FEW_NUM_WARPS=1)),
        ("2 warps", knobs(FEW_NUM_WARPS=2)),
        ("8 warps", knobs(FEW_NUM_WARPS=8)),
        ("1 warp, 32-key blocks", knobs(FEW_NUM_WARPS=1, FEW_BLOCK_N=32)),
        ("2 warps, 128-key blocks", knobs(FEW_NUM_WARPS=2, FEW_BLOCK_N=128)),
        ("1 warp, splits of 64 keys", knobs(FEW_NUM_WARPS=1, **splits64)),
        ("splits of 64 keys", knobs(**splits64)),
        ("splits of 64 keys, a combine kernel", knobs(FEW_FUSED_COMBINE=False, **splits64)),
        ("splits of 128 keys", knobs(FEW_ONE_SPLIT_KEYS=0, FEW_MIN_SPLIT_KEYS=128)),
        ("without decode attention", knobs(_no_attention)),
    ]
    try:
        rounds(model, prompt, args, variants, repeats=1, positions=(16, 64, 128, 224))
    finally:
        knobs()()
        forms.APPEND_ATTENTION = append


def _tiles(model: Any, prompt: list[list[int]], args: argparse.Namespace) -> None:
    variants = [("before", False, False), ("wide K tiles", True, False), ("now", True, True)]
    steps: dict[str, list[float]] = {}
    try:
        for _ in range(2):
            for name, wide, q_in in variants:
                _variant(wide, q_in)
                model.drop_step_graphs()
                model.generate(prompt, 200, temperature=0, stop_token_ids=())
                steps.setdefault(name, []).append(round(_step_us(model, 1) * 1e6, 1))
        for name, us in steps.items():
            print(f"{args.model}: {name:14s} graph step us {us}")
        for name, wide, q_in in (variants[0], variants[2]):
            _variant(wide, q_in)
            for k in (1, 8):
                model.drop_step_graphs()
                tps, outs = timed_generate(
                    model, prompt, args.new, args.repeats, temperature=0, stop_token_ids=(),
                    steps_per_sync=k,
                )  # fmt: skip
                same = all(o == outs[0] for o in outs)
                print(f"{args.model}: {name:14s} steps_per_sync {k}: {tps:.1f} tok/s, "
                      f"repeats equal {same}")  # fmt: skip
    finally:
        _variant(True, True)


EXPERIMENTS: dict[str, Callable[[Any, list[list[int]], argparse.Namespace], None]] = {
    "tiles": _tiles, "pdl": _pdl, "overlap": _overlap, "prefetch": _prefetch,
    "append": _append, "qkv-write": _qkv_write, "splits": _splits,
    "length-chunks": _length_chunks, "lean": _lean, "leave-out": _leave_out,
    "early-loads": _early_loads, "attention-loop": _attention_loop,
    "attention-positions": _attention_positions,
    **GEMV_EXPERIMENTS, **RUN_EXPERIMENTS,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--experiment",
        default="tiles",
        choices=tuple(EXPERIMENTS),
    )
    p.add_argument("--quantize", default=None, choices=("fp8", "int4", "nvfp4"),
                   help="the weights quantized at load (quant-sites and quant-norm need it; "
                        "the other experiments then run on the quantized model)")  # fmt: skip
    p.add_argument("--context", type=int, default=None,
                   help="the KV cache's slots (default: what the run needs; a chat session's "
                        "cache spans the model's context)")  # fmt: skip
    p.add_argument(
        "--at",
        type=int,
        default=128,
        help="cache position where a step of the 32-step graph is timed",
    )
    args = p.parse_args(argv)
    if args.experiment in ("quant-sites", "quant-norm") and args.quantize is None:
        p.error(f"--experiment {args.experiment} needs --quantize")
    if args.experiment == "early-tile" and args.quantize is not None:
        p.error("--experiment early-tile times the dense GEMV's products: no --quantize")
    need = cache_need(PROMPT_LEN, args.new)
    if args.context is not None and args.context < need:
        p.error(f"--context must be at least {need} (the cache a run of --new {args.new} needs)")
    room = args.context if args.context is not None else need
    if not 1 <= args.at <= room - 32:
        p.error(f"--at must lie in 1..{room - 32} (the cache's slots less a 32-step run; "
                "--context sets them)")  # fmt: skip
    model, cfg, _ = random_model(args.model, quantize=args.quantize)
    if args.context is not None:
        if args.context > model.config.max_context:
            p.error(f"--context {args.context} exceeds the model's {model.config.max_context}")
        model.ensure_cache(1, args.context)  # later, smaller requests keep it
    args.cfg = cfg
    prompt = random_prompts(cfg, 1, PROMPT_LEN)
    EXPERIMENTS[args.experiment](model, prompt, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
