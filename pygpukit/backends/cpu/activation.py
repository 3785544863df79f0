"""Activations and gated activations (NumPy reference).

Formulas:
- sigmoid(x) = 1 / (1 + exp(-x)), evaluated as e/(1+e) with e = exp(-|x|) on the negative side
  so that exp never overflows.
- silu(x) = x * sigmoid(x) (Elfwing et al. 2018; "swish").
- softplus(x) = log(1 + exp(x)), evaluated as max(x, 0) + log1p(exp(-|x|)): exp never
  overflows and the small term keeps its precision (log1p) for |x| large.
- gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016), evaluated as
  0.5 x erfc(-x / sqrt 2), which is the same function without the cancellation of 1 + erf for
  x << 0.
- gelu tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (Hendrycks & Gimpel),
  evaluated as x * sigmoid(2u) (identity 0.5 (1 + tanh u) = sigmoid(2u)), again cancellation-free.
- silu_mul(gate, up) = silu(gate) * up; gelu_mul(gate, up) = gelu(gate) * up (SwiGLU/GeGLU,
  Shazeer 2020). The product is rounded once, as a fused kernel stores it.

erfc: float64 uses math.erfc (vectorised; libm, ~1 ulp). float32 uses the Chebyshev fit of
Numerical Recipes in C, 2nd ed., section 6.2 (`erfcc`), whose fractional error is below 1.2e-7
for every real argument (relative, so also in the tail where gelu(x) is tiny); evaluating it in
float32 adds a few ulps, and rounding of z*z in the exponent adds up to about z^2 * 2^-23
relative (1e-6 at z = 4, where gelu(-5.7) ~ -1e-7).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import Array, DTypeLike, compute_dtype, finish, float_result, promote

__all__ = ["sigmoid", "relu", "silu", "gelu", "softplus", "silu_mul", "gelu_mul"]

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# Numerical Recipes erfcc coefficients, from t^0 to t^9.
_ERFCC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)
_erfc_f64 = np.vectorize(math.erfc, otypes=[np.float64])


def erfc_compute(z: Array) -> Array:
    """erfc(z) in z's (compute) dtype: libm for float64, the NR erfcc fit for float32."""
    z = np.asarray(z)
    if z.dtype == np.float64:
        return np.asarray(_erfc_f64(z))
    dt = z.dtype.type
    az = np.abs(z)
    t = dt(1.0) / (dt(1.0) + dt(0.5) * az)
    # Horner evaluation of the polynomial in t.
    poly = np.full_like(t, dt(_ERFCC[-1]))
    for c in reversed(_ERFCC[:-1]):
        poly = poly * t + dt(c)
    ans = t * np.exp(-az * az + poly)
    return np.asarray(np.where(z >= 0, ans, dt(2.0) - ans))


def sigmoid_compute(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1.0)
    return np.asarray(np.where(x >= 0, one / (one + e), e / (one + e)))


def silu_compute(x: Array) -> Array:
    return x * sigmoid_compute(x)


def softplus_compute(x: Array) -> Array:
    return np.asarray(np.maximum(x, x.dtype.type(0)) + np.log1p(np.exp(-np.abs(x))))


def relu_compute(x: Array) -> Array:
    # np.maximum propagates NaN, as torch.relu does.
    return np.asarray(np.maximum(x, x.dtype.type(0)))


def gelu_compute(x: Array, approximate: str) -> Array:
    dt = x.dtype.type
    if approximate == "none":
        return np.asarray(dt(0.5) * x * erfc_compute(-x * dt(_SQRT1_2)))
    if approximate == "tanh":
        u = dt(_SQRT_2_OVER_PI) * (x + dt(0.044715) * x * x * x)
        return np.asarray(x * sigmoid_compute(dt(2.0) * u))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _unary(fn: Any, x: Array, out_dtype: DTypeLike | None, *args: Any) -> Array:
    x = np.asarray(x)
    rd = float_result(x.dtype) if out_dtype is None else np.dtype(out_dtype)
    with np.errstate(all="ignore"):
        return finish(fn(x.astype(compute_dtype(rd)), *args), rd)


def sigmoid(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """1 / (1 + exp(-x))."""
    return _unary(sigmoid_compute, x, out_dtype)


def relu(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """max(x, 0); integer inputs stay integers."""
    x = np.asarray(x)
    rd = x.dtype if out_dtype is None else np.dtype(out_dtype)
    return finish(relu_compute(x.astype(compute_dtype(rd))), rd)


def silu(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """x * sigmoid(x)."""
    return _unary(silu_compute, x, out_dtype)


def softplus(x: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
    return _unary(softplus_compute, x, out_dtype)


def gelu(x: Array, *, approximate: str = "none", out_dtype: DTypeLike | None = None) -> Array:
    """GELU, exact erf form (approximate="none") or tanh form (approximate="tanh")."""
    return _unary(gelu_compute, x, out_dtype, approximate)


def _gated(fn: Any, gate: Array, up: Array, out_dtype: DTypeLike | None, *args: Any) -> Array:
    gate, up = np.asarray(gate), np.asarray(up)
    rd = float_result(promote(gate.dtype, up.dtype)) if out_dtype is None else np.dtype(out_dtype)
    ct = compute_dtype(rd)
    with np.errstate(all="ignore"):
        return finish(fn(gate.astype(ct), *args) * up.astype(ct), rd)


def silu_mul(gate: Array, up: Array, *, out_dtype: DTypeLike | None = None) -> Array:
    """silu(gate) * up (SwiGLU), one rounding."""
    return _gated(silu_compute, gate, up, out_dtype)


def gelu_mul(
    gate: Array,
    up: Array,
    *,
    approximate: str = "none",
    out_dtype: DTypeLike | None = None,
) -> Array:
    """gelu(gate) * up (GeGLU), one rounding."""
    return _gated(gelu_compute, gate, up, out_dtype, approximate)
