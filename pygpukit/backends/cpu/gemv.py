"""Decode GEMV and quantized-weight products (NumPy reference), plus the weight formats'
reference quantizers and dequantizers (pygpukit.qweight builds on them).

Each product is the float64 product of x with the DEQUANTIZED weight, plus bias, rounded once
(correctly, see round_to) to x's dtype: the reference the native kernels (native/src/gemv) are
measured against. Unlike the rest of the NumPy backend (float32 compute for half types), these
ops compute in float64, so the reference carries no accumulation error of its own.

Weight formats, W [N, K] in the torch.nn.Linear layout (row n = output feature n), values packed
along K (native/src/gemv/gemv.h holds the same text):
- fp8: float8_e4m3fn codes [N, K]; float32 scales per output channel [N] (block 0) or per block
  of 128 along K [N, ceil(K/128)] (block 128). W = code * scale.
- int4: signed 4-bit values in [-8, 7] (pygpukit's int4 dtype: two a byte, the low nibble holds
  the even k); scales [N, ceil(K/128)] in float32, bfloat16 or float16, one per group of 128
  along K, no zero point. W = value * scale.
- nvfp4: fp4 e2m1 codes packed two a byte (low nibble = even k) as uint8 [N, K/2]; float8_e4m3fn
  scales per block of 16 along K [N, K/16]; one float32 global scale.
  W = e2m1(code) * scale * global_scale.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._common import Array

__all__ = [
    "FP8_MAX",
    "E2M1_MAX",
    "INT4_GROUP",
    "FP8_BLOCK",
    "NVFP4_BLOCK",
    "round_to",
    "quantize_fp8_weight",
    "quantize_int4_weight",
    "quantize_nvfp4_weight",
    "nvfp4_global_scale",
    "int4_range_error",
    "dequantize_fp8_weight",
    "dequantize_int4_weight",
    "dequantize_nvfp4_weight",
    "gemv",
    "linear_gemv",
    "linear_silu_mul",
    "rmsnorm_linear",
    "gemv_fp8",
    "gemv_int4",
    "gemv_nvfp4",
    "gemv_fp8_silu_mul",
    "gemv_int4_silu_mul",
    "gemv_nvfp4_silu_mul",
    "rmsnorm_gemv_fp8",
    "rmsnorm_gemv_int4",
    "rmsnorm_gemv_nvfp4",
]

FP8_MAX = 448.0  # largest finite float8_e4m3fn
E2M1_MAX = 6.0  # largest fp4 e2m1
INT4_MAX = 7.0  # symmetric int4: scale = amax / 7, values in [-7, 7] (-8 unused)
INT4_GROUP = 128
FP8_BLOCK = 128
NVFP4_BLOCK = 16
_F64 = np.dtype(np.float64)
_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
_E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)
_NUMPY_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), _F64)
# The 16 e2m1 values by code (bit 3 sign, bits 2..1 exponent, bit 0 mantissa).
E2M1_VALUES = np.arange(16, dtype=np.uint8).view(_E2M1).astype(np.float64)


def round_to(y: Array, dtype: object) -> Array:
    """float64 values rounded once, to nearest even, to ``dtype``.

    NumPy rounds float64 to float32/float16 directly. ml_dtypes narrows float64 through float32
    (two roundings), so for its types (bfloat16, fp8, fp4) y is first rounded to float32 with
    round-to-odd (truncate, then set the last bit when inexact): a later rounding to a format
    at least two bits narrower is then the correct rounding of y (Boldo and Melquiond).
    """
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    y = np.asarray(y, dtype=_F64)
    if dt in _NUMPY_FLOATS:
        with np.errstate(over="ignore"):  # overflow rounds to inf, as it should
            return y.astype(dt)
    with np.errstate(over="ignore"):  # beyond float32: inf, rounded back to float32's max below
        f = y.astype(np.float32)
    f64 = f.astype(_F64)
    inexact = np.isfinite(y) & (f64 != y)
    f = np.where(inexact & (np.abs(f64) > np.abs(y)), np.nextafter(f, np.float32(0)), f)
    bits = f.astype(np.float32).view(np.uint32) | inexact.astype(np.uint32)
    res: Array = bits.view(np.float32).astype(dt)
    return res


def _blocks(w: Array, block: int) -> Array:
    """|w| maxima per block of ``block`` along K: [N, ceil(K/block)] (a last partial block)."""
    n, k = w.shape
    nb = -(-k // block)
    pad = np.zeros((n, nb * block), dtype=_F64)
    pad[:, :k] = np.abs(w)
    out: Array = pad.reshape(n, nb, block).max(axis=2) if nb else np.zeros((n, 0), _F64)
    return out


def _expand(scales: Array, block: int, k: int) -> Array:
    """Per-block scales [N, nb] -> per-element [N, K] (float64)."""
    out: Array = np.repeat(np.asarray(scales).astype(_F64), block, axis=1)[:, :k]
    return out


def quantize_fp8_weight(w: Array, block: int = 0) -> tuple[Array, Array]:
    """(codes float8_e4m3fn [N, K], scales float32 [N] or [N, ceil(K/128)]).

    scale = amax / 448 per output channel (block 0) or per block of 128 along K (block 128);
    codes = round(w / scale) with the stored float32 scale, clipped to +-448. All-zero rows or
    blocks get scale 1; a scale that underflows float32 (amax below about 2^-141) gives codes 0.
    """
    w = np.asarray(w, dtype=_F64)
    amax = np.abs(w).max(axis=1, initial=0.0) if block == 0 else _blocks(w, block)
    scales = np.where(amax > 0, amax / FP8_MAX, 1.0).astype(np.float32)
    s64 = scales.astype(_F64)[:, None] if block == 0 else _expand(scales, block, w.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(s64 > 0, w / s64, 0.0)
    codes = round_to(np.clip(v, -FP8_MAX, FP8_MAX), _E4M3)
    return codes, scales


def int4_range_error(amax: float, scale_dtype: str) -> str:
    """The message for int4 scales (amax / 7) that overflow scale_dtype."""
    fix = "scale w down" if scale_dtype == "float32" else "use scale_dtype float32"
    return f"quantize int4: |w| up to {amax:.4g} needs scales beyond {scale_dtype}'s range; {fix}"


def quantize_int4_weight(
    w: Array, group: int = INT4_GROUP, scale_dtype: object = np.float32
) -> tuple[Array, Array]:
    """(values int8 in [-8, 7] [N, K], scales [N, ceil(K/group)] in scale_dtype).

    scale = amax / 7 per group, rounded to scale_dtype; values = round-half-even(w / scale)
    with that stored scale, clipped to [-8, 7]. All-zero groups get scale 1; a scale that
    underflows to 0 quantizes its group to 0. ValueError when a scale overflows scale_dtype.
    """
    w = np.asarray(w, dtype=_F64)
    amax = _blocks(w, group)
    scales = round_to(np.where(amax > 0, amax / INT4_MAX, 1.0), scale_dtype)
    s64 = scales.astype(_F64)
    if not np.isfinite(s64).all():
        raise ValueError(int4_range_error(float(amax.max()), scales.dtype.name))
    s_el = _expand(s64, group, w.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s_el > 0, np.rint(w / s_el), 0.0)
    return np.clip(q, -8, 7).astype(np.int8), scales


def nvfp4_global_scale(amax: float) -> float:
    """nvfp4's global scale for a weight whose max |w| is amax: amax / (6 * 448) as float32, 1
    for an all-zero weight or one so small that the float32 quotient underflows."""
    with np.errstate(over="ignore"):  # inf past float32's range: the caller refuses it
        g = float(np.float32(amax / (E2M1_MAX * FP8_MAX))) if amax > 0 else 1.0
    return g if g != 0.0 else 1.0


def quantize_nvfp4_weight(w: Array, g: float | None = None) -> tuple[Array, Array, float]:
    """(codes packed uint8 [N, K/2], scales float8_e4m3fn [N, K/16], global scale).

    global = nvfp4_global_scale(amax(w)) (or g when given); block scale = the block's amax / 6
    / global rounded to e4m3; codes = e2m1 round-to-nearest-even of w / (scale * global),
    clipped to +-6. K must be even (K % 32 == 0 for the GPU kernel).
    """
    w = np.asarray(w, dtype=_F64)
    k = w.shape[1]
    if k % NVFP4_BLOCK:
        raise ValueError(f"quantize nvfp4: K={k} must be a multiple of {NVFP4_BLOCK}")
    if g is None:
        g = nvfp4_global_scale(float(np.abs(w).max(initial=0.0)))
    bmax = _blocks(w, NVFP4_BLOCK)
    scales = round_to(np.minimum(bmax / (E2M1_MAX * g), FP8_MAX), _E4M3)
    s_el = _expand(scales, NVFP4_BLOCK, k) * g
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(s_el > 0, w / s_el, 0.0)
    codes = round_to(np.clip(v, -E2M1_MAX, E2M1_MAX), _E2M1).view(np.uint8) & 0xF
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales, g


def unpack_e2m1(packed: Array) -> Array:
    """uint8 [N, K/2] -> e2m1 codes [N, K] (low nibble = even k)."""
    p = np.asarray(packed, dtype=np.uint8)
    codes = np.empty((p.shape[0], 2 * p.shape[1]), dtype=np.uint8)
    codes[:, 0::2] = p & 0xF
    codes[:, 1::2] = p >> 4
    return codes


def dequantize_fp8_weight(data: Array, scales: Array, block: int) -> Array:
    """float64 [N, K] = code * scale: per output channel when block is 0 (scales [N] or
    [N, 1]), else per block of 128 along K."""
    d = np.asarray(data).astype(np.float32).astype(_F64)
    s = np.asarray(scales).astype(_F64)
    out: Array = d * (s.reshape(-1, 1) if block == 0 else _expand(s, block, d.shape[1]))
    return out


def dequantize_int4_weight(data: Array, scales: Array, group: int = INT4_GROUP) -> Array:
    """float64 [N, K] = value * scale of its group (data: int4 or int8 values [N, K])."""
    d = np.asarray(data).astype(np.int8).astype(_F64)
    out: Array = d * _expand(scales, group, d.shape[1])
    return out


def dequantize_nvfp4_weight(data: Array, scales: Array, global_scale: float) -> Array:
    """float64 [N, K] = e2m1(code) * block scale * global scale (data: packed uint8 [N, K/2])."""
    vals = E2M1_VALUES[unpack_e2m1(data)]
    s = np.asarray(scales).astype(np.float32).astype(_F64)
    out: Array = vals * _expand(s, NVFP4_BLOCK, vals.shape[1]) * float(global_scale)
    return out


def _product(x: Array, w64: Array, bias: Array | None) -> Array:
    x = np.asarray(x)
    y = x.astype(_F64) @ w64.T
    if bias is not None:
        y = y + np.asarray(bias).astype(_F64)
    return round_to(y, x.dtype)


def gemv(x: Array, w: Array, bias: Array | None = None) -> Array:
    """x [..., K] @ w[N, K]^T (+ bias) in float64, rounded once to x's dtype."""
    return _product(x, np.asarray(w).astype(_F64), bias)


def linear_silu_mul(x: Array, w: Array) -> Array:
    """silu(x @ w[:I]^T) * (x @ w[I:]^T) for w [2I, K], float64, rounded once to x's dtype."""
    x = np.asarray(x)
    h = x.astype(_F64) @ np.asarray(w).astype(_F64).T
    i = h.shape[-1] // 2
    g = h[..., :i]
    with np.errstate(over="ignore"):  # exp(-g) = inf for very negative g: silu(g) -> -0.0
        y = g / (1.0 + np.exp(-g)) * h[..., i:]
    return round_to(y, x.dtype)


def rmsnorm_linear(
    x: Array,
    norm_weight: Array,
    w: Array,
    bias: Array | None = None,
    residual: Array | None = None,
    *,
    eps: float,
) -> Array | tuple[Array, Array]:
    """rmsnorm(h) @ w[N, K]^T (+ bias) with h = x (+ residual), all in float64 (the normalised
    row is not rounded), one rounding to x's dtype; returns y, or (y, h) with a residual."""
    from .norm import rmsnorm

    x = np.asarray(x)
    h = None
    if residual is not None:  # the residual stream, as gp.rmsnorm(residual=) stores it
        _, h = rmsnorm(x, norm_weight, residual, eps=eps)
    # The norm of a float64 row is float64: the normalised row is never rounded.
    n = rmsnorm((x if h is None else h).astype(_F64), norm_weight, eps=eps)
    y = np.asarray(n) @ np.asarray(w).astype(_F64).T
    if bias is not None:
        y = y + np.asarray(bias).astype(_F64)
    out = round_to(y, x.dtype)
    return out if h is None else (out, h)


# gp.linear's one-row decode path (op linear_gemv): the same product as op gemv.
linear_gemv = gemv


def gemv_fp8(
    x: Array, data: Array, scales: Array, bias: Array | None = None, *, block: int
) -> Array:
    """x @ dequantize_fp8_weight(data, scales, block)^T (+ bias), float64, rounded once."""
    return _product(x, dequantize_fp8_weight(data, scales, block), bias)


def gemv_int4(
    x: Array, data: Array, scales: Array, bias: Array | None = None, *, group: int
) -> Array:
    """x @ dequantize_int4_weight(data, scales, group)^T (+ bias), float64, rounded once."""
    return _product(x, dequantize_int4_weight(data, scales, group), bias)


def gemv_nvfp4(
    x: Array, data: Array, scales: Array, bias: Array | None = None, *, global_scale: float
) -> Array:
    """x @ dequantize_nvfp4_weight(data, scales, global_scale)^T (+ bias), float64, rounded once."""
    return _product(x, dequantize_nvfp4_weight(data, scales, global_scale), bias)


# The gated forms (ops gemv_<format>_silu_mul): data holds 2I rows, a gated MLP's gate rows then
# its up rows; silu(x @ Wg^T) * (x @ Wu^T) in float64, rounded once (as linear_silu_mul).
def gemv_fp8_silu_mul(x: Array, data: Array, scales: Array, *, block: int) -> Array:
    """linear_silu_mul(x, dequantize_fp8_weight(data, scales, block))."""
    return linear_silu_mul(x, dequantize_fp8_weight(data, scales, block))


def gemv_int4_silu_mul(x: Array, data: Array, scales: Array, *, group: int) -> Array:
    """linear_silu_mul(x, dequantize_int4_weight(data, scales, group))."""
    return linear_silu_mul(x, dequantize_int4_weight(data, scales, group))


def gemv_nvfp4_silu_mul(x: Array, data: Array, scales: Array, *, global_scale: float) -> Array:
    """linear_silu_mul(x, dequantize_nvfp4_weight(data, scales, global_scale))."""
    return linear_silu_mul(x, dequantize_nvfp4_weight(data, scales, global_scale))


# The RMSNorm forms (ops rmsnorm_gemv_<format>): rmsnorm(x (+ residual)) @ dequant(W)^T (+ bias)
# as rmsnorm_linear computes it (float64, the normalised row not rounded); returns y, or (y, h)
# with a residual. The native kernel rounds the normalised row to x's dtype (its mma operand):
# the tests bound that rounding apart.
def rmsnorm_gemv_fp8(
    x: Array,
    norm_weight: Array,
    data: Array,
    scales: Array,
    bias: Array | None = None,
    residual: Array | None = None,
    *,
    eps: float,
    block: int,
) -> Array | tuple[Array, Array]:
    """rmsnorm_linear(x, norm_weight, dequantize_fp8_weight(data, scales, block), ...)."""
    w = dequantize_fp8_weight(data, scales, block)
    return rmsnorm_linear(x, norm_weight, w, bias, residual, eps=eps)


def rmsnorm_gemv_int4(
    x: Array,
    norm_weight: Array,
    data: Array,
    scales: Array,
    bias: Array | None = None,
    residual: Array | None = None,
    *,
    eps: float,
    group: int,
) -> Array | tuple[Array, Array]:
    """rmsnorm_linear(x, norm_weight, dequantize_int4_weight(data, scales, group), ...)."""
    w = dequantize_int4_weight(data, scales, group)
    return rmsnorm_linear(x, norm_weight, w, bias, residual, eps=eps)


def rmsnorm_gemv_nvfp4(
    x: Array,
    norm_weight: Array,
    data: Array,
    scales: Array,
    bias: Array | None = None,
    residual: Array | None = None,
    *,
    eps: float,
    global_scale: float,
) -> Array | tuple[Array, Array]:
    """rmsnorm_linear(x, norm_weight, dequantize_nvfp4_weight(data, scales, global_scale), ...)."""
    w = dequantize_nvfp4_weight(data, scales, global_scale)
    return rmsnorm_linear(x, norm_weight, w, bias, residual, eps=eps)
