"""The Triton side of the gemv family:
- the dense decode GEMV, gemv_dense.py: op linear_gemv (gp.linear's one-row decode path), op
  linear_silu_mul (the gated MLP's fused gate/up product) and op rmsnorm_linear (the product
  with the RMSNorm before it read in), launched with programmatic dependent launch on sm_90+;
  also the twin of the native op gemv (each row computed on its own: it serves gp.gemv under
  the deterministic mode);
- the twins of the quantized decode GEMV ops (gemv_fp8, gemv_int4, gemv_nvfp4) and of their
  gated forms (gemv_<format>_silu_mul): the mixed-input GEMM of qgemm.py, which serves any
  number of rows. The routing table puts them after the native GEMV kernels, so they serve
  GPU hosts without the native extension (and gemv_<format> the deterministic mode: the native
  GEMV's split is not batch invariant)."""

from pygpukit.backends.triton_kernels.gemv_dense import (
    gemv,
    linear_gemv,
    linear_silu_mul,
    rmsnorm_linear,
)
from pygpukit.backends.triton_kernels.qgemm import (
    gemv_fp8,
    gemv_fp8_silu_mul,
    gemv_int4,
    gemv_int4_silu_mul,
    gemv_nvfp4,
    gemv_nvfp4_silu_mul,
)

__all__ = [
    "gemv",
    "gemv_fp8",
    "gemv_fp8_silu_mul",
    "gemv_int4",
    "gemv_int4_silu_mul",
    "gemv_nvfp4",
    "gemv_nvfp4_silu_mul",
    "linear_gemv",
    "linear_silu_mul",
    "rmsnorm_linear",
]
