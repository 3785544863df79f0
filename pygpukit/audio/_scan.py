"""Prefix scans over the frame axis from routed elementwise ops (there is no cumsum op).

Both scans are Hillis-Steele: ceil(log2(n)) passes, pass k combining each element with the one
2**k before it through two strided views of the previous pass (a new array each pass, so no pass
reads what it writes). Work is O(n log n) elementwise ops, all on the device, with no n x n
matrix and no host round trip.

Numerics: every output is combined from at most ceil(log2(n)) + 1 partial results along a
balanced tree, so its rounding error grows like log2(n) * eps, not n * eps as a sequential
running sum does (librosa's phase accumulator and scipy's lfilter are sequential).
"""

from __future__ import annotations

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import empty

__all__ = ["complex_cumprod", "geometric_filter", "mul_conj_into", "mul_into"]


def mul_into(a: GPUArray, b: GPUArray, out: GPUArray) -> None:
    """out = a * b for (re, im) pairs [..., 2] (views of any strides)."""
    ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    ops.sub(ar * br, ai * bi, out=out[..., 0])
    ops.add(ar * bi, ai * br, out=out[..., 1])


def mul_conj_into(a: GPUArray, b: GPUArray, out: GPUArray) -> None:
    """out = a * conj(b) for (re, im) pairs [..., 2]."""
    ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    ops.add(ar * br, ai * bi, out=out[..., 0])
    ops.sub(ai * br, ar * bi, out=out[..., 1])


def complex_cumprod(ri: GPUArray) -> GPUArray:
    """Inclusive cumulative product along axis 1 of (re, im) pairs [batch, n, ..., 2].

    For unit phasors the product's angle is the running sum of their angles (mod 2 pi) and its
    modulus stays within ~3 * log2(n) * eps of 1.
    """
    n = ri.shape[1]
    p = ri
    step = 1
    while step < n:
        q = empty(p.shape, p.dtype, p.device)
        q[:, :step] = p[:, :step]
        mul_into(p[:, step:], p[:, : n - step], q[:, step:])
        p = q
        step *= 2
    return p


def geometric_filter(u: GPUArray, a: float) -> GPUArray:
    """y[..., t] = sum_{k <= t} a**k * u[..., t - k] along the last axis of [batch, n], i.e. the
    recursion y[t] = a * y[t - 1] + u[t] from rest (scipy.signal.lfilter([1], [1, -a], u))."""
    n = u.shape[-1]
    y = u.contiguous()
    step = 1
    while step < n:
        q = empty(y.shape, y.dtype, y.device)
        q[:, :step] = y[:, :step]
        ops.add(y[:, step:], y[:, : n - step] * (a**step), out=q[:, step:])
        y = q
        step *= 2
    return y
