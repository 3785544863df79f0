"""Batch-1 decode with recent decode-step changes turned off again, in one process: the graph-
replayed step's device time (50 replays back to back, two alternating rounds) and generate's
decode tok/s at steps_per_sync 1 and 8, on a benchmark model shape with random bf16 weights.

    python benchmarks/tuning/decode_ab.py [--model llama-3.2-1b|qwen3-8b] [--new 256]

Variants:
- "before": the decode GEMV's 1024-value K tiles at every K (gemv_dense.WIDE_K out of reach)
  and RoPE on the queries as its own kernel (gp.rope before gp.kv_cache_write, at the same
  positions);
- "wide K tiles": the GEMV's [4, 2048] tiles from K = 4096 on, queries still rotated apart;
- "now": the shipped tree (also the queries rotated inside gp.kv_cache_write).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks._models import CONFIGS, random_model, random_prompts, timed_generate
from benchmarks.decode_paths import _step_us
from pygpukit import ops
from pygpukit.backends.triton_kernels import gemv_dense
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.2-1b", choices=sorted(CONFIGS))
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    model, cfg, _ = random_model(args.model)
    prompt = random_prompts(cfg, 1)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
