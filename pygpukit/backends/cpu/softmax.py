"""Softmax with optional scale and causal mask (NumPy reference), shared with sdpa.

softmax(s)_j = exp(s_j - m) / sum_k exp(s_k - m), m = max_k s_k (max subtraction keeps exp in
range; the result is mathematically unchanged). Causal masking on the last two axes
[..., Sq, Sk]: query i sees key j iff j <= i + (Sk - Sq), i.e. the queries are the last Sq
positions of the key sequence (the convention of FlashAttention-2 and of decode with a KV cache).
A row with no visible finite entry (every key masked, or all -inf) gives zeros rather than
0/0 = NaN, the FlashAttention convention, so padding cannot leak NaN into later layers.
"""

from __future__ import annotations

import numpy as np

from ._common import Array, DTypeLike, finish, float_compute_dtype, float_result

__all__ = ["softmax"]


def causal_mask(sq: int, sk: int) -> Array:
    """Boolean [sq, sk], True where query i may attend key j (j <= i + sk - sq)."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    return j <= i + (sk - sq)


def softmax_compute(s: Array, axis: int, mask: Array | None) -> Array:
    """Softmax of `s` (already in the compute dtype) along `axis`; `mask` False = excluded."""
    if mask is not None:
        s = np.where(mask, s, s.dtype.type(-np.inf))
    m = np.max(s, axis=axis, keepdims=True)
    # A fully excluded row has m = -inf; shifting by 0 instead keeps every exp at exactly 0.
    m = np.where(m == -np.inf, s.dtype.type(0), m)
    e = np.exp(s - m)
    denom = np.sum(e, axis=axis, keepdims=True)
    return np.asarray(e / np.where(denom == 0, s.dtype.type(1), denom))


def softmax(
    x: Array,
    *,
    axis: int = -1,
    scale: float | None = None,
    causal: bool = False,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """softmax(scale * x) along `axis`; with causal=True, axis must be the last axis and the
    mask applies to the last two axes (see the module docstring)."""
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = float_compute_dtype(rd)
    mask = None
    if causal:
        if x.ndim < 2:
            raise ValueError(f"softmax: causal=True needs x with >= 2 dims, got shape {x.shape}")
        if axis not in (-1, x.ndim - 1):
            raise ValueError(f"softmax: causal=True needs axis=-1, got axis={axis}")
        mask = causal_mask(x.shape[-2], x.shape[-1])
    with np.errstate(all="ignore"):
        s = x.astype(ct)
        if scale is not None:
            s = s * ct.type(scale)
        return finish(softmax_compute(s, axis, mask), rd)
