"""The Triton twins of the quantized decode GEMV ops (gemv_fp8, gemv_int4, gemv_nvfp4): the
mixed-input GEMM of qgemm.py, which serves any number of rows. The routing table puts them after
the native GEMV kernels, so they serve the deterministic mode (the native GEMV's split is not
batch invariant) and GPU hosts without the native extension. The dense gemv has no Triton twin
(gp.linear's cuBLASLt path is as fast at every decode row count)."""

from pygpukit.backends.triton_kernels.qgemm import gemv_fp8, gemv_int4, gemv_nvfp4

__all__ = ["gemv_fp8", "gemv_int4", "gemv_nvfp4"]
