"""The 0.2.x Triton entry points: ``from pygpukit.triton import triton_available, from_gpuarray,
kernels``.

``kernels.rmsnorm(x, w, out, eps=1e-5)`` and friends write into ``out`` with the Triton kernels of
``pygpukit.backends.triton_kernels``: each call is the routed op (``gp.rmsnorm`` ...: validated by
the op layer) with the triton backend forced, so when Triton cannot serve the call it raises
RouteError saying why and never falls back to another backend. The routed ops are the current
API; these remain for existing scripts.
"""

from __future__ import annotations

from typing import Any

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.routing import backends, route

__all__ = ["triton_available", "from_gpuarray", "kernels"]


def triton_available() -> bool:
    """Whether the Triton backend can run (Triton plus a CUDA driver, or the interpreter)."""
    ok, _ = backends.availability("triton")
    return ok


def from_gpuarray(x: GPUArray) -> GPUArray:
    """What a Triton kernel accepts for ``x``: the GPUArray itself (it has ``data_ptr()`` and a
    dtype whose name Triton understands)."""
    if not isinstance(x, GPUArray):
        raise TypeError(f"from_gpuarray expects a GPUArray, got {type(x).__name__}")
    return x


class _Kernels:
    """0.2.x kernel calls; each writes into ``out`` and returns it."""

    @staticmethod
    def rmsnorm(x: GPUArray, w: GPUArray, out: GPUArray, eps: float = 1e-5) -> Any:
        with route(rmsnorm="triton"):
            return ops.rmsnorm(x, w, eps, out=out)

    @staticmethod
    def layernorm(
        x: GPUArray, w: GPUArray | None, b: GPUArray | None, out: GPUArray, eps: float = 1e-5
    ) -> Any:
        with route(layernorm="triton"):
            return ops.layernorm(x, w, b, eps, out=out)

    @staticmethod
    def softmax(x: GPUArray, out: GPUArray) -> Any:
        with route(softmax="triton"):
            return ops.softmax(x, out=out)

    @staticmethod
    def rotary(
        x: GPUArray,
        cos: GPUArray,
        sin: GPUArray,
        out: GPUArray,
        positions: GPUArray | None = None,
        style: str = "neox",
    ) -> Any:
        """RoPE of x [..., S, H, D] with cos/sin tables [max_pos, D/2] (see gp.rope)."""
        with route(rope="triton"):
            return ops.rope(x, cos, sin, positions, style, out=out)


kernels = _Kernels()
