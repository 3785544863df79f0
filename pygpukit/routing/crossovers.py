"""The routing table's measured crossovers: how many rows of x go to which kernel for the decode
GEMV, the quantized-weight products and their dense forms (pygpukit/ops/gemv.py reads them; the
table in pygpukit/routing/table.py uses DENSE_GEMV_MAX_K and QUANT_CAPABILITY). Each number
carries the measurement it came from."""

from __future__ import annotations

__all__ = [
    "DENSE_GEMV_MAX_K",
    "DENSE_GEMV_MAX_ROWS",
    "QDENSE_FUSED_MAX_ROWS",
    "QDENSE_MIN_ROWS",
    "QGEMV_DEEP_MAX_ASPECT",
    "QGEMV_MAX_ROWS",
    "QGEMV_MAX_ROWS_DEEP",
    "QUANT_CAPABILITY",
    "W8A8_MAX_ROWS",
    "qgemv_max_rows",
]

# gp.linear_quantized's crossovers (pygpukit/ops/gemv.py), measured with
# benchmarks/mixed_gemm.py (bf16 x, K4096 N14336 and K14336 N4096; BENCHMARKS.md "Mixed-input
# GEMM"): x with at most QGEMV_MAX_ROWS rows goes to the decode GEMV (gemv_<format>); more rows to
# the mixed-input GEMM (qgemm_<format>). H100, 2026-11-26: fp8 34 us at 32 rows against the
# GEMV's 64. H200, 2026-11-28, with the GEMV's launch rules of that day (GEMV / qgemm us): fp8 at
# 24-32 rows 41.4-45.0 / 34.0-34.5 at N14336 but 59.7-59.8 / 76.8-81.5 at K14336 (the mixed-input
# GEMM has no split of K), so 16 stays for wide weights; int4 at 32 rows 43.6 / 41.0 and 44.8 /
# 81.3; nvfp4 at 48 rows 61.5 / 70.7 and 59.1 / 175.5 (at 64 rows 77.5 / 70.1 at N14336), so
# nvfp4 takes 48.
QGEMV_MAX_ROWS = {"fp8": 16, "int4": 32, "nvfp4": 48}
# ... and for a weight no more than 1.5 times as wide as it is deep (N <= 1.5 K: square
# projections, an MLP's down projection, a GQA qkv projection), where the mixed-input GEMM has
# few output tiles and no split of K: fp8's GEMV up to 32 rows. H200, driver 580.159.04, GEMV /
# qgemm us at 24 and 32 rows (benchmarks/mixed_gemm.py --formats fp8 --rows 24 32 --shapes
# NxK): 2026-11-28, N2048 K8192 22.2 / 48.7 and 22.6 / 45.9, N4096 K4096 21.2 / 27.3 and
# 21.4 / 26.0, N4096 K14336 59.8 / 81.5 and 59.7 / 76.8 (above); a later call the same day,
# N6144 K4096 21.9 / 27.3 and 21.9 / 26.2, N8192 K8192 42.5 / 50.0 and 42.2 / 47.2, N10240
# K8192 53.9 / 62.4 and 55.4 / 60.7, N8192 K28672 142.0 / 157.2 and 145.9 / 149.5. The wide
# N14336 K4096 (N = 3.5 K) goes the other way; between 1.5 K and 3.5 K nothing was measured.
QGEMV_MAX_ROWS_DEEP = {"fp8": 32}
QGEMV_DEEP_MAX_ASPECT = 1.5  # N / K


def qgemv_max_rows(fmt: str, n: int, k: int) -> int:
    """The most rows of x that gp.linear_quantized gives the decode GEMV for an [n, k] weight
    of this format (QGEMV_MAX_ROWS, or QGEMV_MAX_ROWS_DEEP when n <= 1.5 k)."""
    if n <= QGEMV_DEEP_MAX_ASPECT * k:
        return QGEMV_MAX_ROWS_DEEP.get(fmt, QGEMV_MAX_ROWS[fmt])
    return QGEMV_MAX_ROWS[fmt]


# gp.linear and gp.linear_silu_mul hand x with at most DENSE_GEMV_MAX_ROWS rows (batch-1 decode)
# to the Triton decode GEMV (ops linear_gemv / linear_silu_mul; pygpukit/ops/gemv.py
# decode_gemv says when) on CUDA outside the deterministic mode and unless a route forces op
# linear, else cuBLASLt (and silu_mul on its output). Measured in a graph-replayed decode step
# on an H200 (BENCHMARKS.md "Batch-1 decode"). ops.gemv reads these at import.
DENSE_GEMV_MAX_ROWS = 1
DENSE_GEMV_MAX_K = 16384  # the kernel unrolls its K tiles (1024 values, 2048 from K = 4096)
# ... and from QDENSE_MIN_ROWS rows on, the weight is dequantized into x's dtype for the call and
# gp.linear (cuBLASLt) runs the product: once the product is compute-bound the mainloop's
# dequantization costs more than one pass over W (256 rows: int4 112 us dense vs 121 in the
# kernel, nvfp4 116 vs 156; fp8 is faster in the kernel at 256 rows, 98 vs 120 us, and level at
# 512, 153 vs 155).
# W is rounded once to x's dtype there, as a dense model of that dtype holds it.
QDENSE_MIN_ROWS = {"fp8": 512, "int4": 256, "nvfp4": 256}
# ... where an int4 or fp8 weight's dense path runs as one product (op qgemm_<format>_dense:
# CUTLASS's mixed-input GEMM on Hopper, the same rounded weight without expanding it), up to
# QDENSE_FUSED_MAX_ROWS rows. Measured on an H100 (benchmarks/mixed_gemm.py, 2026-11-28;
# BENCHMARKS.md "CUTLASS's int4 and fp8 mixed-input GEMM"; K4096 N14336 / K14336 N4096, bf16
# x): int4 (bf16 | float32 scales) 256 rows 73-86 / 69-80 us against 110-112 / 119-120
# expanded, 512 rows 124-148 / 119-140 against 146-148 / 135-137 (float32 scales level or 2%
# behind), 1024 rows 231-274 / 223-266 against 208-237 / 201-204: int4 stops at 512, the rows
# between not measured; fp8 (per-channel | 128-block scales) 512 rows 115-120 / 110-116 against
# 156-157 / 145-147, 1024 rows 215-220 / 211-215 against 217-218 / 213 (level).
QDENSE_FUSED_MAX_ROWS = {"int4": 512, "fp8": 1024}
# W8A8 (a "w8a8" weight): cuBLASLt's FP8 x FP8 product (matmul_fp8) at every row count it was
# timed but one (1-4096; qgemm_w8a8 was level at one row and 1.35x to 5x slower from 16 rows;
# cuBLASLt's few-row FP8 times varied 1.4-2.4x between two runs), so 0: the
# mixed-input kernel on x's e4m3 codes serves W8A8 under the deterministic mode only.
W8A8_MAX_ROWS = 0
# Triton converts e4m3 (fp8 codes, nvfp4 block scales) in hardware from sm_89 on.
QUANT_CAPABILITY = {"fp8": (8, 9), "int4": (8, 0), "nvfp4": (8, 9)}
