"""The deterministic, batch-invariant mode.

Always, in either mode: the same call on the same inputs gives the same bits run to run (no
atomics in a reduction order, fixed combine orders), and a CUDA-graph replay gives the bits the
eager call gave (the launch shapes are functions of the shapes only).

What the mode adds is *batch invariance*: the bits of one row of a result do not depend on how
many other rows the call carries, on their values, or, in the LLM engine, on how a prompt was
chunked in prefill. A speedup heuristic that picks a kernel, a tile or a split count from the
number of rows breaks that; under the mode the engine's ops use launch shapes fixed by the
reduced dimension alone:

- ``linear`` / ``matmul`` / ``linear_bias_gelu`` (floating point): the Triton fixed-tile GEMM
  (pygpukit/backends/triton_kernels/matmul.py: 16-row tiles, K split into fixed 1024-element
  chunks summed in order) instead of cuBLASLt, whose heuristic picks a kernel (and split-K or
  stream-K) per M, and instead of the decode GEMV that takes one row in the default mode
  (``linear_silu_mul`` then runs the fixed-tile GEMM and ``silu_mul``). On the CPU: one row at
  a time.
- ``sdpa_decode``: a fixed split size in keys (not a split count from the grid), fixed 16-row
  tiles and a fixed combine step; on the CPU each query row attends over exactly its visible keys.
- The Triton row kernels (rmsnorm, layernorm, softmax): a fixed number of rows per program.
- ``sum`` / ``mean`` (Triton): one tile shape per reduced length and no split.
- flash ``sdpa`` (Triton): no key split (its count followed the batch). Its query tiles still
  follow the query count, which is why the engine does not prefill through it under the mode.
- The transformer runs every step, prefill included, through the KV-cache write and
  ``sdpa_decode`` (so a prompt prefilled whole or in chunks gives the same bits), in forward
  calls of at most 256 tokens (models/transformer.py DETERMINISTIC_CHUNK).

Ops that are batch invariant by construction (element-wise ops, embedding, rope, the KV-cache
write, max / min / argmax, integer products) run unchanged. Ops for which no batch-invariant
kernel exists yet are refused under the mode with a RouteError that says "not batch invariant",
never silently run: ``matmul_fp8``, the native GEMV kernels (``gemv``'s Triton twin computes
each row on its own and serves the mode; the quantized ones have
the Triton mixed-input GEMM as their invariant twin, one tile for every row count, which also
serves W8A8 under the mode), cuBLASLt products (so float64 products on a GPU, which the Triton
GEMM does not serve), and the native twins of ``sdpa``, ``sdpa_decode``, ``sum`` and ``mean``
for floating dtypes.

Switch it with ``gp.set_deterministic(True)`` (process-wide), ``with gp.deterministic():``, or
``PYGPUKIT_DETERMINISTIC=1`` at start-up; ``set_deterministic(None)`` goes back to what the
environment says. The mode changes which kernels run, never the precision: results stay within
the documented tolerances of the float64 reference in both modes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pygpukit.precision import _env_flag

__all__ = ["set_deterministic", "is_deterministic", "deterministic"]

_lock = threading.Lock()
_explicit: list[bool | None] = [None]
# The value in force, read on every routed call: one list index, no function call chain.
_on = [_env_flag("PYGPUKIT_DETERMINISTIC")]


def set_deterministic(on: bool | None) -> None:
    """Turn the batch-invariant mode on (True) or off (False), process-wide; None goes back to
    ``PYGPUKIT_DETERMINISTIC``. Takes effect for the next call; a CUDA graph keeps the kernels it
    captured."""
    if on is not None and not isinstance(on, bool):
        raise TypeError(f"set_deterministic: on must be True, False or None, got {on!r}")
    value = _env_flag("PYGPUKIT_DETERMINISTIC") if on is None else on  # may raise: first
    with _lock:
        _explicit[0] = on
        _on[0] = value


def is_deterministic() -> bool:
    """True while the batch-invariant mode is on."""
    return _on[0]


@contextmanager
def deterministic(on: bool = True) -> Iterator[None]:
    """``with gp.deterministic():`` the mode on for the block, then back to what it was. The mode
    is process-wide, like the matmul precision: switch it between calls, not while other threads
    run ops (a forward in flight would mix kernels of both modes)."""
    if not isinstance(on, bool):
        raise TypeError(f"deterministic: on must be True or False, got {on!r}")
    with _lock:
        before = _explicit[0]
    set_deterministic(on)
    try:
        yield
    finally:
        set_deterministic(before)
