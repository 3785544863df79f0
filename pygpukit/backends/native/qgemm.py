"""The mixed-input GEMM ops' native twins: qgemm_fp8, qgemm_int4 and qgemm_nvfp4 are the decode
GEMV kernels of gemv.py (native/src/gemv), which serve any number of rows (W is re-read once per
16 rows of x). They stand behind the Triton kernel where it cannot run (compute capability
below 8.9 for e4m3, no Triton, ``ROUTE=*:native``); the extension's gemv family provides them."""

from pygpukit.backends.native.gemv import gemv_fp8 as qgemm_fp8
from pygpukit.backends.native.gemv import gemv_int4 as qgemm_int4
from pygpukit.backends.native.gemv import gemv_nvfp4 as qgemm_nvfp4

__all__ = ["qgemm_fp8", "qgemm_int4", "qgemm_nvfp4"]
