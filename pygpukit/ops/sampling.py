"""sample: the next token of each row, drawn where the logits are (no logits copy to the host).

``gp.sample(logits, counter, seen=None, *, seed, temperature, top_k, top_p, min_p,
repetition_penalty)`` -> int32 [B]. The distribution is HF transformers' logits-processor chain
(the host sampler's in pygpukit.models.sampling): repetition penalty on the tokens marked in
``seen``, temperature, top-k, top-p, min-p; temperature 0 is greedy (first index of the largest
penalized logit). The random number of row b is Philox4x32-10 keyed by ``seed`` at counter
``counter[b]`` (pygpukit/backends/cpu/sampling.py): the same on every backend, so a seed repeats
a run, and a row's draw does not depend on the other rows.

Two inputs are updated in place, so a captured CUDA graph of a decode step can hold the draw:
``counter`` (int64 [B]) advances by one per call, and the drawn token is marked in ``seen``
(uint8 [B, V]) when it is given.
"""

from __future__ import annotations

import math
from typing import Any

from pygpukit._memory import check_target
from pygpukit.array import GPUArray
from pygpukit.dtypes import int32
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["sample"]

_OP = "sample"


def _number(name: str, v: Any, ok: Any, want: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(float(v)):
        raise ValueError(f"{_OP}: {name} must be {want}, got {v!r}")
    return float(v)


def sample(
    logits: GPUArray,
    counter: GPUArray,
    seen: GPUArray | None = None,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
    out: GPUArray | None = None,
) -> GPUArray:
    """One token per row of logits [B, V] -> int32 [B]; counter (int64 [B]) advances and seen
    (uint8 [B, V], optional) gets the token marked, in place. top_k 0 and top_p 1 disable them,
    min_p 0 disables min-p; temperature 0 is greedy."""
    chk.array(_OP, "logits", logits)
    chk.floating(_OP, "logits", logits)
    if logits.ndim != 2 or logits.shape[1] < 1:
        raise ValueError(
            f"{_OP}: logits must be [batch, vocab] with vocab >= 1, got {chk.desc(logits)}"
        )
    b, v = logits.shape
    chk.array(_OP, "counter", counter)
    if counter.dtype.name != "int64" or counter.shape != (b,):
        raise ValueError(
            f"{_OP}: counter must be int64 [{b}] (one per row), got {chk.desc(counter)}"
        )
    check_target(counter, f"{_OP}: counter")
    if seen is not None:
        chk.array(_OP, "seen", seen)
        if seen.dtype.name != "uint8" or seen.shape != (b, v):
            raise ValueError(f"{_OP}: seen must be uint8 [{b}, {v}], got {chk.desc(seen)}")
        check_target(seen, f"{_OP}: seen")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"{_OP}: seed must be an int in [0, 2**63), got {seed!r}")
    t = _number("temperature", temperature, lambda f: 0 <= f < math.inf, "a finite number >= 0")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"{_OP}: top_k must be an int >= 0 (0: off), got {top_k!r}")
    tp = _number("top_p", top_p, lambda f: 0 < f <= 1, "in (0, 1]")
    mp = _number("min_p", min_p, lambda f: 0 <= f < 1, "in [0, 1)")
    pen = _number(
        "repetition_penalty", repetition_penalty, lambda f: 0 < f < math.inf, "a finite number > 0"
    )
    chk.out_arg(_OP, out, (b,), int32)
    params = {
        "seed": seed, "temperature": t, "top_k": top_k, "top_p": tp, "min_p": mp,
        "repetition_penalty": pen,
    }  # fmt: skip
    inputs = (logits, counter) if seen is None else (logits, counter, seen)
    return run(_OP, inputs, params, out=out)  # type: ignore[no-any-return]
