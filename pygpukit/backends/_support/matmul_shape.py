"""np.matmul's shapes around a backend's 2-D (or strided-batched) product, shared by the
cuBLASLt and integer products of the native backend and the Triton fixed-tile GEMM."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.dtypes import DataType

__all__ = ["product"]


def product(
    a: GPUArray,
    b: GPUArray,
    dt: DataType,
    out: GPUArray | None,
    gemm: Callable[[GPUArray, GPUArray, GPUArray], None],
) -> GPUArray:
    """np.matmul's shapes around ``gemm(a2, b2, d)`` (d[..., M, N] = a2 @ b2, all of dtype dt):
    a 1-D ``a`` is a row and a 1-D ``b`` a column, batch dims broadcast, K == 0 gives zeros.
    gemm may assume nothing of the layouts beyond what GPUArray views allow."""
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(1) if b.ndim == 1 else b
    lead = tuple(np.broadcast_shapes(a2._shape[:-2], b2._shape[:-2]))
    m, k, n = a2._shape[-2], a2._shape[-1], b2._shape[-1]
    shape = (*lead, *((m,) if a.ndim > 1 else ()), *((n,) if b.ndim > 1 else ()))
    res = target(out, shape, dt, a)
    if res.size:
        if k == 0:
            res.fill_(0)
        else:
            gemm(a2, b2, res.view((*lead, m, n)))
    return deliver(res, out)
