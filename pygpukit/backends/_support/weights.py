"""Whether the weights of the products in a block of code are constant for the kernels of the
stream: ``constant_weights()`` says so (the LLM engine's forward, whose weights no kernel
writes), and the decode GEMV then loads its first weight tile before it waits on the kernel
ahead of it (programmatic dependent launch, pygpukit/backends/triton_kernels/gemv_dense.py),
and its RMSNorm form the norm weight too (the model's norm weights are weights here).
Anywhere else the weight may be what the previous kernel writes (``y = gp.linear(a, w)``, then
``gp.linear(b, y)``), so the GEMV waits first. The same promise covers the decode step's cache
positions and lengths, and the rope tables and head-norm weights handed to the cache write:
inside the engine's forward no kernel writes them (they are written before it starts), so the
cache write and decode attention may load them before they wait, where their PREFETCH knobs
(kv_write.PREFETCH_POSITIONS and ANGLES_EARLY, attention_decode.PREFETCH_LENGTHS) say so. A
context variable: per thread and per task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["constant_weights", "weights_are_constant"]

_constant: ContextVar[bool] = ContextVar("pygpukit_constant_weights", default=False)


@contextmanager
def constant_weights() -> Iterator[None]:
    """Promise that no kernel on the stream writes the weights of the products inside (a
    product's norm weight included), nor the positions, lengths, rope tables and head-norm
    weights handed to the cache write and decode attention inside."""
    token = _constant.set(True)
    try:
        yield
    finally:
        _constant.reset(token)


def weights_are_constant() -> bool:
    return _constant.get()
