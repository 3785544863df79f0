"""NumPy backend: the float64-checked reference and the CPU fallback for every op.

Each function takes NumPy arrays (float64/32/16, ml_dtypes bfloat16/fp8, integers, bool)
positionally and scalar parameters by keyword, and returns fresh NumPy arrays (a tuple for ops
with two outputs), in the module of the op's family (the routing table's family, as in the other
homes); ``_adapter.py`` puts them in the routed calling convention. Numerics: float64 inputs
compute in float64, every other float type in float32, integers in their own type; results round
once to the result dtype.
"""

from __future__ import annotations

from pygpukit.backends._record import Backend

from ._adapter import adapt
from .activation import gelu, gelu_mul, relu, sigmoid, silu, silu_mul, softplus
from .attention import sdpa, sdpa_varlen
from .attention_decode import kv_cache_write, sdpa_decode, sdpa_decode_append
from .copy import cast, copy
from .elementwise import (
    add,
    clamp,
    div,
    eq,
    ge,
    gt,
    le,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    sub,
    where,
)
from .embedding import bias_add, embedding
from .fft import fft, ifft, irfft, rfft, rfft_frames, rfft_windowed
from .gemv import (
    gemv,
    gemv_fp8,
    gemv_fp8_silu_mul,
    gemv_int4,
    gemv_int4_silu_mul,
    gemv_nvfp4,
    gemv_nvfp4_silu_mul,
    linear_gemv,
    linear_silu_mul,
    rmsnorm_gemv_fp8,
    rmsnorm_gemv_int4,
    rmsnorm_gemv_nvfp4,
    rmsnorm_linear,
)
from .matmul import linear, linear_bias_gelu, matmul
from .matmul_fp8 import matmul_fp8
from .median import median_filter
from .moe import moe_align, moe_linear, moe_router
from .norm import layernorm, rmsnorm
from .pitch import pyin_observations
from .qgemm import dequantize_weight, qgemm_fp8, qgemm_int4, qgemm_nvfp4, qgemm_w8a8
from .qkv_write import rmsnorm_qkv_rope_write
from .quant import dequantize_fp8, quantize_fp8
from .qweight import quantize_weight, weight_amax
from .reduce import argmax, max, mean, min, sum
from .rope import rope, rope_tables
from .sampling import sample
from .sequence import viterbi
from .softmax import softmax
from .spectral import overlap_add, phase_project
from .unary import abs, cos, exp, log, neg, rsqrt, sin, sqrt, tanh

__all__ = [
    "BACKEND",
    "abs",
    "add",
    "argmax",
    "bias_add",
    "cast",
    "clamp",
    "copy",
    "cos",
    "dequantize_fp8",
    "dequantize_weight",
    "div",
    "embedding",
    "eq",
    "exp",
    "fft",
    "ge",
    "gelu",
    "gelu_mul",
    "gemv",
    "gemv_fp8",
    "gemv_fp8_silu_mul",
    "gemv_int4",
    "gemv_int4_silu_mul",
    "gemv_nvfp4",
    "gemv_nvfp4_silu_mul",
    "linear_gemv",
    "linear_silu_mul",
    "gt",
    "ifft",
    "irfft",
    "kv_cache_write",
    "layernorm",
    "le",
    "linear",
    "linear_bias_gelu",
    "log",
    "lt",
    "matmul",
    "matmul_fp8",
    "max",
    "maximum",
    "mean",
    "median_filter",
    "min",
    "minimum",
    "moe_align",
    "moe_linear",
    "moe_router",
    "mul",
    "ne",
    "neg",
    "overlap_add",
    "phase_project",
    "pow",
    "pyin_observations",
    "qgemm_fp8",
    "qgemm_int4",
    "qgemm_nvfp4",
    "qgemm_w8a8",
    "quantize_fp8",
    "quantize_weight",
    "relu",
    "rfft",
    "rfft_frames",
    "rfft_windowed",
    "rmsnorm",
    "rmsnorm_gemv_fp8",
    "rmsnorm_gemv_int4",
    "rmsnorm_gemv_nvfp4",
    "rmsnorm_linear",
    "rmsnorm_qkv_rope_write",
    "rope",
    "rope_tables",
    "rsqrt",
    "sample",
    "sdpa",
    "sdpa_varlen",
    "sdpa_decode",
    "sdpa_decode_append",
    "sigmoid",
    "silu",
    "silu_mul",
    "softplus",
    "sin",
    "softmax",
    "sqrt",
    "sub",
    "sum",
    "tanh",
    "viterbi",
    "weight_amax",
    "where",
]


def _probe() -> tuple[bool, str]:
    return True, ""


BACKEND: Backend = Backend(
    name="cpu",
    package=__name__,
    devices=frozenset({"cpu"}),
    probe=_probe,
    adapt=adapt,
)
