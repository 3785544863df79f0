"""Whether the weights of the products in a block of code are constant for the kernels of the
stream: ``constant_weights()`` says so (the LLM engine's forward, whose weights no kernel
writes), and the decode GEMV then loads its first weight tile before it waits on the kernel
ahead of it (programmatic dependent launch, pygpukit/backends/triton_kernels/gemv_dense.py).
Anywhere else the weight may be what the previous kernel writes (``y = gp.linear(a, w)``, then
``gp.linear(b, y)``), so the GEMV waits first. A context variable: per thread and per task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["constant_weights", "weights_are_constant"]

_constant: ContextVar[bool] = ContextVar("pygpukit_constant_weights", default=False)


@contextmanager
def constant_weights() -> Iterator[None]:
    """Promise that no kernel on the stream writes the weights of the products inside."""
    token = _constant.set(True)
    try:
        yield
    finally:
        _constant.reset(token)


def weights_are_constant() -> bool:
    return _constant.get()
