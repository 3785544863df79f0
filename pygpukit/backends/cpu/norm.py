"""LayerNorm and RMSNorm over the last axis (NumPy reference).

layernorm (Ba et al. 2016): y = (x - mu) / sqrt(var + eps) * weight + bias, with mu and the
biased variance var = mean((x - mu)^2) taken over the last axis (two-pass, as torch does).
rmsnorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * weight.
Both compute in float32 (float64 for float64) and round once to x's dtype; the weight is applied
in float32 before that rounding, like the fused kernels of vLLM/FlashInfer. (HF Llama instead
rounds the normalised value to the input dtype and then multiplies by the weight; the
difference is one extra rounding.)
"""

from __future__ import annotations

import numpy as np

from ._common import Array, DTypeLike, finish, float_compute_dtype, float_result

__all__ = ["layernorm", "rmsnorm"]


def layernorm(
    x: Array,
    weight: Array | None = None,
    bias: Array | None = None,
    *,
    eps: float = 1e-5,
    out_dtype: DTypeLike | None = None,
) -> Array:
    """LayerNorm over the last axis; weight/bias of shape [x.shape[-1]] (either may be None)."""
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = float_compute_dtype(rd)
    with np.errstate(all="ignore"):
        xc = x.astype(ct)
        mu = np.mean(xc, axis=-1, keepdims=True, dtype=ct)
        d = xc - mu
        var = np.mean(d * d, axis=-1, keepdims=True, dtype=ct)
        y = d / np.sqrt(var + ct.type(eps))
        if weight is not None:
            y = y * np.asarray(weight).astype(ct)
        if bias is not None:
            y = y + np.asarray(bias).astype(ct)
    return finish(y, rd)


def rmsnorm(
    x: Array,
    weight: Array,
    residual: Array | None = None,
    *,
    eps: float = 1e-6,
    out_dtype: DTypeLike | None = None,
) -> Array | tuple[Array, Array]:
    """RMSNorm over the last axis.

    Without residual: returns y. With residual (the fused add + norm of a pre-norm block):
    h = x + residual, rounded to x's dtype as the fused kernel stores it for the next block's
    residual stream, then y = rmsnorm(h); returns (y, h).
    """
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    ct = float_compute_dtype(rd)
    h_out: Array | None = None
    with np.errstate(all="ignore"):
        if residual is not None:
            h_out = finish(x.astype(ct) + np.asarray(residual).astype(ct), x.dtype)
            x = h_out
        xc = x.astype(ct)
        ms = np.mean(xc * xc, axis=-1, keepdims=True, dtype=ct)
        y = xc / np.sqrt(ms + ct.type(eps)) * np.asarray(weight).astype(ct)
    out = finish(y, rd)
    return out if h_out is None else (out, h_out)
