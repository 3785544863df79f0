"""Matrix products: matmul, linear, linear_bias_gelu (NumPy reference).

matmul follows np.matmul: 1-D operands are promoted to a row/column and the added axis removed;
N-D operands are stacks of matrices whose leading dims broadcast. Half-precision inputs are
multiplied in float32 with a float32 accumulator (NumPy's sgemm), float64 in float64, integers
in the integer type, and the result is rounded once.
linear(x, w, b) = x @ w^T + b with w stored [out_features, in_features] (torch.nn.Linear layout);
bias and activation are applied to the float32 accumulator before the single rounding, as a GEMM
epilogue does. Under the deterministic mode (pygpukit/determinism.py) products are computed one
row at a time (a BLAS GEMM's blocking, and so a row's bits, may depend on the number of rows).
"""

from __future__ import annotations

import numpy as np

from pygpukit import determinism

from ._common import Array, DTypeLike, compute_dtype, finish, promote
from .activation import gelu_compute, relu_compute, silu_compute

__all__ = ["matmul", "linear", "linear_bias_gelu", "ACTIVATIONS"]

ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")


def matmul(a: Array, b: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """a @ b with np.matmul broadcasting."""
    a, b = np.asarray(a), np.asarray(b)
    rd = promote(a.dtype, b.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = compute_dtype(rd)
    with np.errstate(all="ignore"):
        return finish(product(a.astype(ct, copy=False), b.astype(ct, copy=False)), rd)


def product(a: Array, b: Array) -> Array:
    """np.matmul(a, b), one row of a at a time under the deterministic mode."""
    if not determinism.is_deterministic() or a.ndim < 2 or a.shape[-2] <= 1:
        return np.matmul(a, b)
    rows = [np.matmul(a[..., i : i + 1, :], b) for i in range(a.shape[-2])]
    # a vector b drops the column axis: row i is then [..., 1] and the rows join on the last axis
    return np.concatenate(rows, axis=-1 if b.ndim == 1 else -2)


def _activate(y: Array, activation: str | None) -> Array:
    if activation is None:
        return y
    if activation == "relu":
        return relu_compute(y)
    if activation == "silu":
        return silu_compute(y)
    if activation == "gelu":
        return gelu_compute(y, "none")
    if activation == "gelu_tanh":
        return gelu_compute(y, "tanh")
    raise ValueError(f"linear: activation must be one of {ACTIVATIONS}, got {activation!r}")


def linear(
    x: Array,
    w: Array,
    bias: Array | None = None,
    *,
    activation: str | None = None,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """activation(x @ w^T + bias); x [..., in], w [out, in], bias [out]."""
    x, w = np.asarray(x), np.asarray(w)
    rd = promote(x.dtype, w.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = compute_dtype(rd)
    with np.errstate(all="ignore"):
        y = product(x.astype(ct, copy=False), w.astype(ct, copy=False).T)
        if bias is not None:
            y = y + np.asarray(bias).astype(ct, copy=False)
        return finish(_activate(y, activation), rd)


def linear_bias_gelu(
    x: Array,
    w: Array,
    bias: Array,
    *,
    approximate: str = "none",
    out_dtype: DTypeLike | None = None,
) -> Array:
    """gelu(x @ w^T + bias) with w [out_features, in_features] (the 0.2.x call form)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(
            f"linear_bias_gelu: approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    act = "gelu" if approximate == "none" else "gelu_tanh"
    return linear(x, w, bias, activation=act, out_dtype=out_dtype)
