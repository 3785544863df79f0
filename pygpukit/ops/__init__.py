"""The op functions, one module per family; `import pygpukit as gp` re-exports all of them.

Each op validates its arguments (TypeError/ValueError naming the argument, its shape and dtype)
and then calls pygpukit.routing.dispatch.run(op_name, inputs, params, out=out), which picks the
backend for the inputs' device. op_name is the backend function's name.
"""

from __future__ import annotations

from pygpukit.ops.activation import gelu, gelu_mul, relu, sigmoid, silu, silu_mul, softplus
from pygpukit.ops.attention import sdpa, sdpa_causal
from pygpukit.ops.attention_decode import kv_cache_write, sdpa_decode, sdpa_decode_append
from pygpukit.ops.attention_varlen import sdpa_varlen
from pygpukit.ops.elementwise import (
    add,
    bias_add,
    bias_add_inplace,
    cast,
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
from pygpukit.ops.embedding import embedding
from pygpukit.ops.gemv import gemv, linear_quantized, linear_silu_mul, rmsnorm_linear
from pygpukit.ops.gguf import dequantize_gguf
from pygpukit.ops.matmul import linear, linear_bias_gelu, matmul, transpose
from pygpukit.ops.median import median_filter
from pygpukit.ops.moe import moe_align, moe_linear, moe_router
from pygpukit.ops.norm import layernorm, rmsnorm
from pygpukit.ops.pitch import pyin_observations
from pygpukit.ops.qkv_write import rmsnorm_qkv_rope_write
from pygpukit.ops.quant import dequantize_fp8, matmul_fp8, quantize_fp8
from pygpukit.ops.reduce import argmax, max, mean, min, sum, sum_axis
from pygpukit.ops.rope import rope, rope_inplace, rope_tables
from pygpukit.ops.sampling import sample
from pygpukit.ops.sequence import viterbi
from pygpukit.ops.softmax import softmax
from pygpukit.ops.spectral import overlap_add, phase_project
from pygpukit.ops.unary import abs, cos, exp, log, neg, rsqrt, sin, sqrt, tanh

__all__ = [
    "abs",
    "add",
    "argmax",
    "bias_add",
    "bias_add_inplace",
    "cast",
    "clamp",
    "cos",
    "dequantize_fp8",
    "div",
    "embedding",
    "eq",
    "exp",
    "ge",
    "gelu",
    "gelu_mul",
    "gemv",
    "dequantize_gguf",
    "gt",
    "kv_cache_write",
    "layernorm",
    "le",
    "linear",
    "linear_bias_gelu",
    "linear_quantized",
    "linear_silu_mul",
    "rmsnorm_linear",
    "rmsnorm_qkv_rope_write",
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
    "quantize_fp8",
    "relu",
    "rmsnorm",
    "rope",
    "rope_inplace",
    "rope_tables",
    "sample",
    "rsqrt",
    "sdpa",
    "sdpa_causal",
    "sdpa_decode",
    "sdpa_decode_append",
    "sdpa_varlen",
    "sigmoid",
    "silu",
    "silu_mul",
    "softplus",
    "sin",
    "softmax",
    "sqrt",
    "sub",
    "sum",
    "sum_axis",
    "tanh",
    "transpose",
    "viterbi",
    "where",
]
