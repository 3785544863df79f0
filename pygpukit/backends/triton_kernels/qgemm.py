"""The mixed-input GEMM: y = x @ dequant(W)^T + bias for the weight formats of pygpukit/qweight.py
(fp8 e4m3 with per-channel or 128-block scales, int4 with 128-group scales, nvfp4), x float16 or
bfloat16, the weight dequantized in the mainloop: the routed ops qgemm_fp8, qgemm_int4 and
qgemm_nvfp4 (prefill and batched decode, more rows than the decode GEMV's crossover), and the
Triton twins of gemv_fp8 / gemv_int4 / gemv_nvfp4 (the same kernel at any row count) and of
their gated forms gemv_<format>_silu_mul (a gated MLP's stacked gate/up weight: the program
also multiplies the up rows and stores silu(g) * u of the two float32 sums).

Numerics (the reference: pygpukit/backends/cpu/gemv.py, the float64 product with the dequantized
weight, rounded once):
- Every weight value enters the tensor-core product exactly. fp8 e4m3 and int4 codes convert to
  x's dtype without rounding; an nvfp4 weight is e2m1 x its e4m3 block scale, at most 6
  significant bits within float16's and bfloat16's range, also exact (the global scale is
  applied to the float32 sum).
- Scales that are not exact in x's dtype (fp8's and int4's float32 scales) never round the
  weight: per-channel fp8 scales multiply the float32 sum once in the epilogue; 128-group scales
  multiply each K tile's float32 partial product (BK divides 128, so a tile sits in one group)
  before it joins the float32 accumulator.
- Bias added to the float32 result, one rounding to x's dtype at the store.

Why "swap AB" (each program computes a [BN, BM] tile of y^T = W x^T): on Hopper the tensor-core
product (wgmma) reads its A operand from registers and B from shared memory, so the weight,
which must pass through registers to be converted, is the A operand, and x, loaded as is, the B
operand. It also puts the large dimension (N, the output features) on the MMA's M side, which
must be at least 64, so small row counts (M = 16..64) need no padding to 64 rows.

Tiles are chosen by the number of rows m (CONFIGS, measured on an H100 with
``benchmarks/mixed_gemm.py --sweep``); under the deterministic mode every m takes the same tile
(DET_CONFIG), so a row's bits do not depend on the batch (tested).
"""

# Triton kernel and @triton.jit function bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

from typing import Any, NamedTuple

import triton
import triton.language as tl

from pygpukit import determinism
from pygpukit.array import GPUArray
from pygpukit.backends._support.output import deliver
from pygpukit.backends._support.rows import as_rows, out_rows
from pygpukit.backends.triton_kernels._common import cdiv
from pygpukit.backends.triton_kernels.activation import sigmoid_c
from pygpukit.backends.triton_kernels.driver import launch
from pygpukit.creation import empty
from pygpukit.dtypes import DataType, as_dtype

__all__ = [
    "CONFIGS",
    "DET_CONFIG",
    "QgemmConfig",
    "config_for",
    "dequantize_weight",
    "gemv_fp8",
    "gemv_fp8_silu_mul",
    "gemv_int4",
    "gemv_int4_silu_mul",
    "gemv_nvfp4",
    "gemv_nvfp4_silu_mul",
    "qgemm_fp8",
    "qgemm_int4",
    "qgemm_nvfp4",
    "qgemm_w8a8",
]

_FP8, _INT4, _NVFP4 = 0, 1, 2
_UINT8 = as_dtype("uint8")


class QgemmConfig(NamedTuple):
    """A tile: BM rows of x, BN output features, BK along K (divides 128), and the launch."""

    bm: int
    bn: int
    bk: int
    warps: int
    stages: int


# (largest m, config) in increasing m; the last serves every larger m. Measured on an H100
# (benchmarks/mixed_gemm.py --sweep, fp8 / int4 / nvfp4 at K4096 N14336 and K14336 N4096, m =
# 16, 64, 512, 4096, 2026-11-26): at N14336 each is the best tile or within 5% of it; the
# K14336 N4096 shape (64 weight tiles, fewer than the 132 SMs) prefers BM 32 at m = 64 (up to
# 10% faster there). From QDENSE_MIN_ROWS (256-512 rows) on, linear_quantized leaves this kernel.
CONFIGS: list[tuple[int, QgemmConfig]] = [
    (16, QgemmConfig(16, 64, 128, 4, 3)),
    (32, QgemmConfig(32, 64, 128, 4, 3)),
    (64, QgemmConfig(64, 64, 128, 4, 3)),
    (1 << 62, QgemmConfig(128, 64, 64, 4, 3)),
]
# The deterministic mode's one tile (any m: the reduction order is a function of K alone).
DET_CONFIG = QgemmConfig(32, 64, 128, 4, 3)
# Under the interpreter, whose cost is per program, one large tile.
_INTERPRET_CONFIG = QgemmConfig(64, 64, 128, 4, 1)


def config_for(m: int) -> QgemmConfig:
    """The tile for m rows of x (DET_CONFIG under the deterministic mode)."""
    from pygpukit.backends.triton_kernels import interpreting

    if interpreting():
        return _INTERPRET_CONFIG
    if determinism.is_deterministic():
        return DET_CONFIG
    for top, cfg in CONFIGS:
        if m <= top:
            return cfg
    return CONFIGS[-1][1]


@triton.jit
def _weights(W, S, rn, k0, N, K, swn, ssn, FMT: tl.constexpr, DT: tl.constexpr,
             BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """The weight tile W[rn, k0 : k0 + BK] in DT, exact (zero past N and K): fp8 codes, int4
    values, or nvfp4 e2m1 values times their e4m3 block scale."""
    nok = (rn < N)[:, None]
    if FMT == 0:
        rk = k0 + tl.arange(0, BK)
        code = tl.load(W + rn.to(tl.int64)[:, None] * swn + rk[None, :],
                       mask=nok & (rk < K)[None, :], other=0)  # fmt: skip
        w = code.to(tl.float8e4nv, bitcast=True).to(DT)
    else:
        rb = k0 // 2 + tl.arange(0, BK // 2)  # two values a byte, the low nibble the even k
        byte = tl.load(W + rn.to(tl.int64)[:, None] * swn + rb[None, :],
                       mask=nok & (rb < K // 2)[None, :], other=0)  # fmt: skip
        if FMT == 1:
            lo = (byte << 4).to(tl.int8, bitcast=True) >> 4  # sign-extended nibbles
            hi = byte.to(tl.int8, bitcast=True) >> 4
            w = tl.reshape(tl.join(lo, hi), (BN, BK)).to(DT)
        else:
            c = tl.reshape(tl.join(byte & 15, byte >> 4), (BN, BK)).to(tl.int16)
            # e2m1 (sign, 2 exponent bits, 1 mantissa bit) placed in a float16's sign, lowest
            # exponent bits and top mantissa bit is the value times 2^-14 (exponent 0 lands
            # on the subnormals, which keeps 0 and 0.5 right): one exact multiply restores it.
            h = ((c & 8) << 12) | ((c & 7) << 9)
            v = h.to(tl.float16, bitcast=True).to(tl.float32) * 16384.0
            rs = k0 // 16 + tl.arange(0, BK // 16)
            s = tl.load(S + rn.to(tl.int64)[:, None] * ssn + rs[None, :],
                        mask=nok & (rs < K // 16)[None, :], other=0)  # fmt: skip
            s = s.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            v = tl.reshape(v, (BN, BK // 16, 16)) * s[:, :, None]
            w = tl.reshape(v, (BN, BK)).to(DT)
    return w


@triton.jit
def _tile_product(acc, xt, W, S, rn, k0, N, K, swn, ssn, FMT: tl.constexpr, GROUP: tl.constexpr,
                  DT: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """acc + W[rn, k0 : k0 + BK] @ xt, the weight tile exact in DT (rows rn < N of W)."""
    w = _weights(W, S, rn, k0, N, K, swn, ssn, FMT=FMT, DT=DT, BN=BN, BK=BK)
    if GROUP > 0:  # the tile's float32 partial times its group's scale
        s = tl.load(S + rn.to(tl.int64) * ssn + k0 // GROUP, mask=rn < N, other=0)
        return acc + tl.dot(w, xt) * s.to(tl.float32)[:, None]
    return tl.dot(w, xt, acc)


@triton.jit
def _finish(acc, S, rn, N, gscale, FMT: tl.constexpr, GROUP: tl.constexpr):
    """The scales that do not vary along K, on the float32 sums of W rows rn."""
    if FMT == 0 and GROUP == 0:  # per-channel scales
        acc *= tl.load(S + rn, mask=rn < N, other=0.0)[:, None]
    if FMT == 2:
        acc *= gscale
    return acc


@triton.jit
def _qgemm_kernel(
    X, RS, W, S, Bias, Y, M, N, K, sxm, swn, ssn, sym, gscale,
    FMT: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, DT: tl.constexpr,
    X_FP8: tl.constexpr, HAS_RS: tl.constexpr, GATED: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_N: tl.constexpr,
):  # fmt: skip
    # Programs sweep GROUP_N weight tiles against every x tile before moving on, so a weight
    # tile is read from HBM once and re-read from L2 by the x tiles (prefill: many x tiles).
    # GATED: N is the number of output columns and W holds 2N rows (gate, then up); the program
    # also multiplies the up rows rn + N and stores silu(g) * u of the two float32 sums.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_N * tiles_m
    first_n = (pid // per_group) * GROUP_N
    size_n = tl.minimum(tiles_n - first_n, GROUP_N)
    pid_n = first_n + (pid % per_group) % size_n
    pid_m = (pid % per_group) // size_n
    rn = pid_n * BN + tl.arange(0, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    mok = rm < M
    nw = 2 * N if GATED else N  # rows of W
    ru = tl.where(rn < N, rn + N, nw)  # the up rows (GATED); columns past N read no row
    acc = tl.zeros([BN, BM], tl.float32)  # y^T tile
    acu = tl.zeros([BN, BM], tl.float32)  # the up rows' tile (GATED)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        xt = tl.load(X + rm.to(tl.int64)[None, :] * sxm + rk[:, None],
                     mask=mok[None, :] & (rk < K)[:, None], other=0)  # fmt: skip
        if X_FP8:  # e4m3 codes of a quantized x (W8A8): exact in DT
            xt = xt.to(tl.float8e4nv, bitcast=True).to(DT)
        acc = _tile_product(acc, xt, W, S, rn, k0, N, K, swn, ssn, FMT=FMT, GROUP=GROUP,
                            DT=DT, BN=BN, BK=BK)  # fmt: skip
        if GATED:
            acu = _tile_product(acu, xt, W, S, ru, k0, nw, K, swn, ssn, FMT=FMT, GROUP=GROUP,
                                DT=DT, BN=BN, BK=BK)  # fmt: skip
    acc = _finish(acc, S, rn, N, gscale, FMT=FMT, GROUP=GROUP)
    if HAS_RS:  # x's per-row scales (W8A8)
        acc *= tl.load(RS + rm, mask=mok, other=0.0)[None, :]
    if HAS_BIAS:
        acc += tl.load(Bias + rn, mask=rn < N, other=0.0).to(tl.float32)[:, None]
    if GATED:  # silu(g) * u in float32, as the activation family computes it
        acc = acc * sigmoid_c(acc) * _finish(acu, S, ru, nw, gscale, FMT=FMT, GROUP=GROUP)
    yp = Y + rm.to(tl.int64)[None, :] * sym + rn[:, None]
    tl.store(yp, acc.to(DT), mask=mok[None, :] & (rn < N)[:, None])


def _bytes(a: GPUArray, cols: int) -> GPUArray:
    """A contiguous packed [N, K] int4 array as the uint8 [N, cols] it is in memory."""
    off = (a._offset * a._dtype.bits) >> 3
    return GPUArray._make(
        a._buf, a._ptr, (a._shape[0], cols), (cols, 1), off, _UINT8, a._device, a._readonly
    )


def _as_u8(a: GPUArray) -> GPUArray:
    """An fp8 array as the uint8 codes it holds (the kernels bitcast them)."""
    return GPUArray._make(a._buf, a._ptr, a._shape, a._estrides, a._offset, _UINT8, a._device)


def _run(fmt: int, x: GPUArray, w: GPUArray, scales: GPUArray, group: int, gscale: float,
         k: int, bias: GPUArray | None, out: GPUArray | None, rs: GPUArray | None = None,
         out_dtype: DataType | None = None, gated: bool = False) -> GPUArray:  # fmt: skip
    """y = x @ W^T: x half (or e4m3 codes with per-row scales rs), y of out_dtype (x's);
    gated: W's rows are gate then up, y = silu(x @ Wg^T) * (x @ Wu^T) (no bias, no rs)."""
    if gated and (w._shape[0] % 2 or bias is not None or rs is not None):
        raise ValueError(
            f"qgemm: a gated product needs an even number of weight rows (gate, then up) and no "
            f"bias or row scales; got {w._shape[0]} rows"
        )
    n = w._shape[0] // 2 if gated else w._shape[0]
    x, m, _, sx = as_rows(x)
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()  # the kernel reads bias[n] at unit stride
    odt = x._dtype if out_dtype is None else out_dtype
    y, sy = out_rows("qgemm", out, (*x._shape[:-1], n), odt, x)
    if m and n:
        cfg = config_for(m)
        ssn = scales._estrides[0] if scales.ndim == 2 else 1
        grid = (cdiv(m, cfg.bm) * cdiv(n, cfg.bn),)
        dt = tl.bfloat16 if odt.name == "bfloat16" else tl.float16
        x_fp8 = x._dtype.is_fp8
        launch(
            _qgemm_kernel, grid,
            _as_u8(x) if x_fp8 else x, rs if rs is not None else scales, w, scales,
            bias if bias is not None else y, y, m, n, k, sx, w._estrides[0], ssn, sy, gscale,
            FMT=fmt, GROUP=group, HAS_BIAS=bias is not None, DT=dt, X_FP8=x_fp8,
            HAS_RS=rs is not None, GATED=gated, BM=cfg.bm, BN=cfg.bn, BK=cfg.bk, GROUP_N=8,
            num_warps=cfg.warps, num_stages=cfg.stages,
        )  # fmt: skip
    return deliver(y, out)


def qgemm_fp8(
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
    return _run(_FP8, x, _as_u8(data), scales, block, 1.0, data._shape[1], bias, out)


def qgemm_int4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    group: int,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (scales * data)^T (+ bias): data int4 [N, K], scales [N, ceil(K/128)]."""
    k = data._shape[1]
    return _run(_INT4, x, _bytes(data, k // 2), scales, group, 1.0, k, bias, out)


def qgemm_nvfp4(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """x @ (e2m1(data) * scales * global_scale)^T (+ bias): data uint8 [N, K/2], float8_e4m3fn
    scales [N, K/16]."""
    k = 2 * data._shape[1]
    return _run(_NVFP4, x, data, _as_u8(scales), 0, float(global_scale), k, bias, out)


def qgemm_w8a8(
    q: GPUArray,
    row_scales: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    bias: GPUArray | None = None,
    *,
    out_dtype: Any,
    out: GPUArray | None = None,
) -> GPUArray:
    """(row_scales . q) @ (scales . data)^T (+ bias) in out_dtype: q float8_e4m3fn [M, K] (x
    quantized per row), row_scales float32 [M, 1] (contiguous, as quantize_fp8 makes it), data
    float8_e4m3fn [N, K], scales float32 [N]. W8A8 under the deterministic mode (cuBLASLt's
    FP8 product, faster elsewhere, is not batch invariant); the codes enter the product
    exactly, both scales multiply the float32 sum, one rounding."""
    return _run(
        _FP8, q, _as_u8(data), scales, 0, 1.0, data._shape[1], bias, out,
        rs=row_scales, out_dtype=as_dtype(out_dtype),
    )  # fmt: skip


@triton.jit
def _dequant_kernel(W, S, Y, N, K, swn, ssn, syn, gscale,
                    FMT: tl.constexpr, GROUP: tl.constexpr, DT: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """Y[rn, rk] = W's values times their scales, in float32, rounded once to DT."""
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    k0 = tl.program_id(1) * BK
    rk = k0 + tl.arange(0, BK)
    w = _weights(W, S, rn, k0, N, K, swn, ssn, FMT=FMT, DT=tl.float32, BN=BN, BK=BK)
    if GROUP > 0:
        w *= tl.load(S + rn.to(tl.int64) * ssn + k0 // GROUP, mask=rn < N, other=0.0).to(
            tl.float32
        )[:, None]
    elif FMT == 0:
        w *= tl.load(S + rn, mask=rn < N, other=0.0)[:, None]
    if FMT == 2:
        w *= gscale
    tl.store(Y + rn.to(tl.int64)[:, None] * syn + rk[None, :], w.to(DT),
             mask=(rn < N)[:, None] & (rk < K)[None, :])  # fmt: skip


def dequantize_weight(
    data: GPUArray,
    scales: GPUArray,
    *,
    fmt: str,
    block: int,
    global_scale: float,
    out_dtype: Any,
    out: GPUArray | None = None,
) -> GPUArray:
    """W [N, K] of an fp8 / int4 / nvfp4 QuantizedWeight's arrays, each value its code times
    its scales computed in float32, then rounded to out_dtype (the many-row products of
    linear_quantized run gp.linear on it)."""
    code = {"fp8": _FP8, "int4": _INT4, "nvfp4": _NVFP4}[fmt]
    n = data._shape[0]
    k = 2 * data._shape[1] if fmt == "nvfp4" else data._shape[1]
    if fmt == "int4":
        w = _bytes(data, k // 2)
    elif fmt == "fp8":
        w = _as_u8(data)
    else:
        w = data
    s = _as_u8(scales) if fmt == "nvfp4" else scales
    dt = as_dtype(out_dtype)
    if out is not None and out.is_contiguous() and out.shape == (n, k) and out.dtype is dt:
        y = out
    else:  # written fresh (and copied into out by deliver)
        y = empty((n, k), dt, data._device)
    if n and k:
        ssn = s._estrides[0] if s.ndim == 2 else 1
        bk = 128
        launch(
            _dequant_kernel, (cdiv(n, 64), cdiv(k, bk)),
            w, s, y, n, k, w._estrides[0], ssn, k, float(global_scale),
            FMT=code, GROUP=block if fmt != "nvfp4" else 0,
            DT=tl.bfloat16 if dt.name == "bfloat16" else tl.float16, BN=64, BK=bk,
            num_warps=4,
        )  # fmt: skip
    return deliver(y, out)


# The same kernel is the Triton twin of the decode GEMV ops (routed after the native GEMV: it
# serves them under the deterministic mode, or where the native extension is not built).
gemv_fp8 = qgemm_fp8
gemv_int4 = qgemm_int4
gemv_nvfp4 = qgemm_nvfp4


# ... and of their gated forms (ops gemv_<format>_silu_mul): data holds 2I rows, the gate rows
# then the up rows of a gated MLP; y [..., I] = silu(x @ Wg^T) * (x @ Wu^T) of the two float32
# sums (each with its scales), one rounding.
def gemv_fp8_silu_mul(
    x: GPUArray, data: GPUArray, scales: GPUArray, *, block: int, out: GPUArray | None = None
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the fp8 weight [Wg; Wu] (scales as gemv_fp8's)."""
    return _run(_FP8, x, _as_u8(data), scales, block, 1.0, data._shape[1], None, out, gated=True)


def gemv_int4_silu_mul(
    x: GPUArray, data: GPUArray, scales: GPUArray, *, group: int, out: GPUArray | None = None
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the int4 weight [Wg; Wu] (scales as gemv_int4's)."""
    k = data._shape[1]
    return _run(_INT4, x, _bytes(data, k // 2), scales, group, 1.0, k, None, out, gated=True)


def gemv_nvfp4_silu_mul(
    x: GPUArray,
    data: GPUArray,
    scales: GPUArray,
    *,
    global_scale: float,
    out: GPUArray | None = None,
) -> GPUArray:
    """silu(x @ Wg^T) * (x @ Wu^T) for the nvfp4 weight [Wg; Wu] (scales as gemv_nvfp4's)."""
    k = 2 * data._shape[1]
    return _run(_NVFP4, x, data, _as_u8(scales), 0, float(global_scale), k, None, out, gated=True)
