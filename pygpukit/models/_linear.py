"""The model's weight kinds and the two calls that take any of them.

A linear weight is a dense GPUArray [out, in] (gp.linear), a QuantizedWeight (gp.linear_quantized:
fp8/int4/nvfp4 quantized at load, or a GGUF file's blocks kept as stored), or, for a GGUF file
whose q, k and v projections use different block formats (a Q4_K_M file stores v in Q6_K), a
tuple of QuantizedWeights stacked by rows: each writes its columns of one output, so attention
still sees one [.., (H + 2 Hkv) * D] projection. The embedding table is dense or a GGUF
QuantizedWeight whose rows are dequantized as they are looked up (gp.dequantize_gguf).
"""

from __future__ import annotations

from typing import TypeAlias

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.dtypes import DataType
from pygpukit.qweight import QuantizedWeight

__all__ = ["Weight", "linear", "embed", "out_features", "weight_bytes"]

Weight: TypeAlias = GPUArray | QuantizedWeight | tuple[QuantizedWeight, ...]


def out_features(w: Weight) -> int:
    if isinstance(w, tuple):
        return sum(p.shape[0] for p in w)
    return int(w.shape[0])


def weight_bytes(w: Weight | None) -> int:
    """Device bytes of a weight (data plus scales)."""
    if w is None:
        return 0
    if isinstance(w, tuple):
        return sum(p.nbytes for p in w)
    return int(w.nbytes)


def linear(x: GPUArray, w: Weight, bias: GPUArray | None = None) -> GPUArray:
    """x @ W^T + bias for any weight kind (module docstring)."""
    if isinstance(w, GPUArray):
        return ops.linear(x, w, bias)
    if isinstance(w, QuantizedWeight):
        return ops.linear_quantized(x, w, bias)
    y = empty((*x.shape[:-1], out_features(w)), x.dtype, x.device)
    c = 0
    for part in w:
        n = part.shape[0]
        b = None if bias is None else bias[c : c + n]
        ops.linear_quantized(x, part, b, out=y[..., c : c + n])
        c += n
    return y


def embed(ids: GPUArray, table: GPUArray | QuantizedWeight, dtype: DataType) -> GPUArray:
    """Rows of the embedding table at ids, in the model's dtype."""
    if isinstance(table, QuantizedWeight):
        return ops.dequantize_gguf(table, ids, dtype=dtype)
    return ops.embedding(ids, table)
