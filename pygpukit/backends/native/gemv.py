"""Decode GEMV and quantized-weight products on the native backend (native/src/gemv): the
implementations of the routed ops gemv, gemv_fp8, gemv_int4 and gemv_nvfp4, the gated forms
gemv_<format>_silu_mul (a gated MLP's gate/up product in one launch) and the RMSNorm forms
rmsnorm_gemv_<format> (a pre-norm block's norm and the product after it), with the signatures
of their NumPy references (pygpukit/backends/cpu/gemv.py), plus ``linear_rows``, the entry
pygpukit/backends/native/matmul.py uses when gp.linear hands a small-M product to the GEMV kernel.

The kernels read x and W with 16-byte loads: x is read in place when its rows step with one
stride that keeps them 16-byte aligned (last dim contiguous), else copied first; a dense weight
is read in place when its rows are contiguous and 16-byte aligned, else copied (a full copy of
W per call: keep weights contiguous). Quantized data and scales are contiguous by construction
(QuantizedWeight). y comes out contiguous (an out= of another layout receives a copy).

On sm_90+ (backends/_support/pdl.py) the kernels are launched with programmatic dependent
launch, as the Triton decode GEMV is (PDL_LAUNCH below), where the code the driver runs was
compiled for sm_90+ (a build without sm_90 code has no wait to compile, and launches plainly):
a launch may start while the kernel before it finishes and waits on it before it reads x;
inside the engine's forward (``constant_weights()``) its first weight and scale loads go before
that wait, unless this call copied the weight (the copy is then the kernel ahead).
"""

from __future__ import annotations

from typing import Any

from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver, target
from pygpukit.backends._support.pdl import pdl_enabled
from pygpukit.backends._support.rows import rows_of
from pygpukit.backends._support.weights import weights_are_constant
from pygpukit.backends.native._common import aligned, aligned_rows, stream_of
from pygpukit.backends.native._libs import extension
from pygpukit.creation import empty

__all__ = [
    "gemv",
    "gemv_fp8",
    "gemv_fp8_silu_mul",
    "gemv_int4",
    "gemv_int4_silu_mul",
    "gemv_nvfp4",
    "gemv_nvfp4_silu_mul",
    "linear_rows",
    "rmsnorm_gemv_fp8",
    "rmsnorm_gemv_int4",
    "rmsnorm_gemv_nvfp4",
]

# True: launched with programmatic dependent launch where pdl_enabled says so (see above).
# H200, 2026-11-28 (benchmarks/quantized.py --at-load llama-3.2-1b --layers 16 --gemv-pdl off on
# off on: one model a format, the graph recaptured at each switch, tokens identical): batch-1
# decode tok/s off / on, two rounds: int4 1248 / 1279 and 1097 / 1160, fp8 1019 / 1103 and
# 1050 / 1090, nvfp4 1161 / 1246 and 1107 / 1205. False: the plain launch.
PDL_LAUNCH = True


def _ext() -> Any:
    """The extension, which must have been built with the gemv family."""
    ext = extension()
    if not hasattr(ext, "gemv"):
        from pygpukit.errors import BackendUnavailableError

        raise BackendUnavailableError(
            f"_pygpukit_native was built without the gemv family (it has {ext.families}); "
            "rebuild with scripts/build_native.sh"
        )
    return ext


def _ready(a: GPUArray | None) -> GPUArray | None:
    """An optional operand (bias, scales) made aligned."""
    return None if a is None else aligned(a)


def _launch_flags(x: GPUArray, copied: bool) -> tuple[bool, bool]:
    """(pdl, prefetch) of a launch on x's device: the early launch where it is on, the weight
    read before the wait where the weights are constant and this call did not copy them."""
    pdl = PDL_LAUNCH and pdl_enabled(x._device)
    return pdl, pdl and not copied and weights_are_constant()


# The RMSNorm form's operands (ops rmsnorm_gemv_<format>): the norm weight, eps and the
# residual (or None).
Norm = tuple[GPUArray, float, GPUArray | None]


def _launch(
    fmt: str,
    x: GPUArray,
    w: GPUArray,
    w_row_bytes: int,
    n: int,
    scales: GPUArray | None,
    s_row: int,
    block: int,
    global_scale: float,
    bias: GPUArray | None,
    out: GPUArray | None,
    copied: bool,
    gated: bool,
    norm: Norm | None = None,
) -> tuple[GPUArray, GPUArray | None]:
    """The launch; copied: the caller copied the weight for this call (a copy of the scales
    here counts too); gated: W's n rows are gate then up, y [..., n / 2] = silu(g) * u; norm:
    the RMSNorm form (one row of x). Returns (y, h), h = x + residual in a fresh array where
    norm gives a residual, else None."""
    lead = x.shape[:-1]
    x, m, k, sx = aligned_rows(x)
    y = target(out, (*lead, n // 2 if gated else n), x._dtype, x)
    given = scales
    bias, scales = _ready(bias), _ready(scales)
    pdl, prefetch = _launch_flags(x, copied or scales is not given)
    nw = res = h = None
    eps = 0.0
    if norm is not None:
        nw, eps, res = aligned(norm[0]), float(norm[1]), _ready(norm[2])
        # A fresh block: the kernel's block 0 stores h while the others still read x and res.
        h = None if res is None else empty((*lead, k), x._dtype, x._device)
    # fmt: off
    _ext().gemv(
        x._device.index, stream_of(x), fmt, x._dtype.name,
        "float32" if scales is None else scales._dtype.name, m, n, k,
        x.data_ptr(), sx, w.data_ptr(), w_row_bytes,
        0 if scales is None else scales.data_ptr(), s_row, block, float(global_scale),
        0 if bias is None else bias.data_ptr(), y.data_ptr(), pdl, prefetch, gated,
        norm is not None, 0 if nw is None else nw.data_ptr(),
        0 if res is None else res.data_ptr(), 0 if h is None else h.data_ptr(), eps,
    )
    # fmt: on
    return deliver(y, out), h


def gemv(
    x: GPUArray, w: GPUArray, bias: GPUArray | None = None, *, out: GPUArray | None = None
) -> GPUArray:
    """x [..., K] @ w[N, K]^T (+ bias) with w of x's dtype (float16/bfloat16)."""
    n = w.shape[0]
    got = rows_of(w)
    copied = got is None or w.data_ptr() % 16 != 0 or (got[2] * w.itemsize) % 16 != 0
    if copied:
        w = w.copy()
        got = rows_of(w)
    assert got is not None
    # fmt: off
    return _launch(
        "dense", x, w, got[2] * w.itemsize, n, None, 1, 0, 1.0, bias, out, copied, False
    )[0]
    # fmt: on


def _fp8(x: GPUArray, data: GPUArray, scales: GPUArray, bias: GPUArray | None, block: int,
         out: GPUArray | None, gated: bool,
         norm: Norm | None = None) -> tuple[GPUArray, GPUArray | None]:  # fmt: skip
    n, k = data.shape
    s_row = 1 if block == 0 else scales.shape[1]
    w = aligned(data)
    # fmt: off
    return _launch(
        "fp8", x, w, k, n, scales, s_row, block, 1.0, bias, out, w is not data, gated, norm
    )
    # fmt: on


def _int4(x: GPUArray, data: GPUArray, scales: GPUArray, bias: GPUArray | None, group: int,
          out: GPUArray | None, gated: bool,
          norm: Norm | None = None) -> tuple[GPUArray, GPUArray | None]:  # fmt: skip
    n, k = data.shape
    w = aligned(data)
    # fmt: off
    return _launch(
        "int4", x, w, k // 2, n, scales, scales.shape[1], group, 1.0, bias, out, w is not data,
        gated, norm,
    )
    # fmt: on


def _nvfp4(x: GPUArray, data: GPUArray, scales: GPUArray, bias: GPUArray | None,
           global_scale: float, out: GPUArray | None, gated: bool,
           norm: Norm | None = None) -> tuple[GPUArray, GPUArray | None]:  # fmt: skip
    n, half_k = data.shape
    w = aligned(data)
    # fmt: off
    return _launch(
        "nvfp4", x, w, half_k, n, scales, scales.shape[1], 16, global_scale, bias, out,
        w is not data, gated, norm,
    )
    # fmt: on


def gemv_fp8(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    block: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (scales * data)^T (+ bias): data float8_e4m3fn [N, K], float32 scales [N] (block 0)
    or [N, ceil(K/128)] (block 128)."""
    return _fp8(x, data, scales, bias, block, out, False)[0]


def gemv_int4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    group: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (scales * data)^T (+ bias): data int4 [N, K], scales [N, ceil(K/128)]."""
    return _int4(x, data, scales, bias, group, out, False)[0]


def gemv_nvfp4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ dequant(data)^T (+ bias): e2m1 codes uint8 [N, K/2], e4m3 scales [N, K/16]."""
    return _nvfp4(x, data, scales, bias, global_scale, out, False)[0]


# The gated forms (ops gemv_<format>_silu_mul): data holds 2I rows, a gated MLP's gate rows
# then its up rows, and one launch stores silu(x @ Wg^T) * (x @ Wu^T) [..., I]: a row tile's
# 16 W rows are 8 gate rows and their 8 up rows (native/src/gemv/gemv_wa.cuh, gemv_wa_kernel's
# Gated instantiations), so the epilogue finds both sums of an output in one lane. The
# extension rejects an odd number of rows (ValueError) before anything runs.
def gemv_fp8_silu_mul(
    x: GPUArray, data: GPUArray, scales: GPUArray, *, block: int, out: GPUArray | None = None
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the fp8 weight [Wg; Wu] (scales as gemv_fp8's)."""
    return _fp8(x, data, scales, None, block, out, True)[0]


def gemv_int4_silu_mul(
    x: GPUArray, data: GPUArray, scales: GPUArray, *, group: int, out: GPUArray | None = None
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the int4 weight [Wg; Wu] (scales as gemv_int4's)."""
    return _int4(x, data, scales, None, group, out, True)[0]


def gemv_nvfp4_silu_mul(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    *,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the nvfp4 weight [Wg; Wu] (scales as gemv_nvfp4's)."""
    return _nvfp4(x, data, scales, None, global_scale, out, True)[0]


# The RMSNorm forms (ops rmsnorm_gemv_<format>): one row of x; rmsnorm(h, norm_weight, eps) @
# dequant(W)^T (+ bias) with h = x (+ residual), in one launch: each block normalises the row
# into shared memory (gp.rmsnorm's formula, the row rounded to x's dtype as the mma's operand)
# before the product's loop (native/src/gemv/gemv_wa_x.cuh, norm_row). Returns y, or (y, h) with
# a residual (h = x + residual rounded to x's dtype, gp.rmsnorm(residual=)'s bits).
def _pair(yh: tuple[GPUArray, GPUArray | None]) -> GPUArray | tuple[GPUArray, GPUArray]:
    y, h = yh
    return y if h is None else (y, h)


def rmsnorm_gemv_fp8(
    x: GPUArray,
    norm_weight: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    *,
    eps: float,
    block: int,
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """rmsnorm(x (+ residual)) @ (scales * data)^T (+ bias), scales as gemv_fp8's."""
    return _pair(_fp8(x, data, scales, bias, block, out, False, (norm_weight, eps, residual)))


def rmsnorm_gemv_int4(
    x: GPUArray,
    norm_weight: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    *,
    eps: float,
    group: int,
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """rmsnorm(x (+ residual)) @ (scales * data)^T (+ bias), scales as gemv_int4's."""
    return _pair(_int4(x, data, scales, bias, group, out, False, (norm_weight, eps, residual)))


def rmsnorm_gemv_nvfp4(
    x: GPUArray,
    norm_weight: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    *,
    eps: float,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray | tuple[GPUArray, GPUArray]:
    """rmsnorm(x (+ residual)) @ dequant(data)^T (+ bias), scales as gemv_nvfp4's."""
    norm = (norm_weight, eps, residual)
    return _pair(_nvfp4(x, data, scales, bias, global_scale, out, False, norm))


def linear_rows(
    x: GPUArray, w: GPUArray, y: GPUArray, m: int, n: int, k: int, bias: GPUArray | None
) -> None:
    """y[m, n] = x[m, k] @ w[n, k]^T (+ bias) for contiguous, 16-byte aligned x, w, y and bias
    of one half dtype, k % 8 == 0 (the caller, native._gemm_rows, checked all of it)."""
    # Early launch, but W read after the wait: gp.linear may have cast the weight in this call
    # (out_dtype=), and this path does not know (it is off by default: GEMV_MAX_M).
    pdl, prefetch = _launch_flags(y, True)
    # fmt: off
    _ext().gemv(
        y._device.index, stream_of(y), "dense", y._dtype.name, "float32", m, n, k,
        x.data_ptr(), k, w.data_ptr(), 2 * k, 0, 1, 0, 1.0,
        0 if bias is None else bias.data_ptr(), y.data_ptr(), pdl, prefetch,
    )
    # fmt: on
