"""The mixed-input GEMM ops qgemm_fp8, qgemm_int4 and qgemm_nvfp4 (NumPy reference): the same
product as the decode GEMV ops of gemv.py (float64 with the dequantized weight, rounded once);
the ops differ only in the kernel that serves them on the GPU (the row count decides,
pygpukit/ops/gemv.py)."""

from .gemv import gemv_fp8 as qgemm_fp8
from .gemv import gemv_int4 as qgemm_int4
from .gemv import gemv_nvfp4 as qgemm_nvfp4

__all__ = ["qgemm_fp8", "qgemm_int4", "qgemm_nvfp4"]
