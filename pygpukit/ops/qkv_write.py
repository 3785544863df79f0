"""The attention block's first half at decode in one call: rmsnorm_qkv_rope_write.

``rmsnorm_qkv_rope_write(x, norm_weight, w_qkv, k_cache, v_cache, positions, cos, sin,
num_heads=)`` is gp.rmsnorm_linear (the pre-norm block's RMSNorm and the qkv projection), then
gp.kv_cache_write of the new k and v (k rotated) with the queries rotated at the same
positions: x [B, S, K] (S new tokens a sequence), w_qkv [(H + 2 Hkv) D, K] (the q rows, then
the k rows, then the v rows, as a fused qkv projection stacks them), contiguous caches
[B, Hkv, S_max, D], positions int32 [B] (token j of sequence b goes to positions[b] + j), and
RoPE tables over the whole head (cos/sin [max_pos, D / 2] of gp.rope_tables). Returns the
rotated q [B, S, H, D], or (q, h) with ``residual=`` (h = x + residual, the residual stream).

Where gp.rmsnorm_linear would take its one-kernel decode GEMV (ops/gemv.decode_gemv: one
half-precision row on CUDA outside the deterministic mode, a norm weight of x's dtype) and
D % 4 == 0, it is one launch (op rmsnorm_qkv_rope_write, also whenever a route names it): that
GEMV rotates its own q and k columns and stores k and v into the caches itself, so the decode
step's separate cache write goes away. q, the cached k and v and h have the bits the two ops
give (the product rounded to x's dtype, then rotated in float32 and rounded once). Otherwise
the two routed ops run (route rules naming rmsnorm_linear or kv_cache_write apply to those; the
one launch replaces both whatever they name: the engine asks decode_forms.qkv_rope_write, which
keeps the two ops where such a rule exists). The rules of gp.kv_cache_write hold for the
positions: on the GPU a position outside the cache stores nothing and one outside the tables
gives NaN in the rotated values; the NumPy backend raises IndexError.
"""

from __future__ import annotations

from typing import Any

from pygpukit._memory import check_target, shares_elements
from pygpukit.array import GPUArray
from pygpukit.ops import _checks as chk
from pygpukit.ops.attention_decode import (
    _block_table,
    _caches,
    _int32_vector,
    _tables,
    kv_cache_write,
)
from pygpukit.ops.gemv import _bias_checks, decode_gemv, rmsnorm_linear
from pygpukit.routing.dispatch import run
from pygpukit.routing.overrides import named_backend

__all__ = ["rmsnorm_qkv_rope_write"]


def rmsnorm_qkv_rope_write(
    x: GPUArray,
    norm_weight: GPUArray,
    w_qkv: GPUArray,
    k_cache: GPUArray,
    v_cache: GPUArray,
    positions: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    *,
    num_heads: int,
    bias: GPUArray | None = None,
    residual: GPUArray | None = None,
    eps: float = 1e-6,
    rope_style: str = "neox",
) -> Any:
    """q [B, S, H, D] of rmsnorm(x (+ residual)) @ w_qkv^T (+ bias), rotated at positions[b] + j,
    with the k and v rows rotated (k) and stored into the caches there; (q, h) with a
    residual. See the module docstring."""
    from pygpukit.ops.norm import rms_args

    op = "rmsnorm_qkv_rope_write"
    e = rms_args(op, x, norm_weight, eps, residual, None, "norm_weight")
    if x.ndim != 3:
        raise ValueError(f"{op}: x must be [B, S, K] (S new tokens a sequence), got {chk.desc(x)}")
    _caches(op, k_cache, v_cache)
    if k_cache.dtype is not x.dtype:
        raise TypeError(f"{op}: k_cache has {chk.desc(k_cache)} but x has dtype {x.dtype.name}")
    batch, s, k = x.shape
    cap = _block_table(op, None, batch, k_cache)
    if s > cap:
        raise ValueError(f"{op}: x has {s} new tokens but the cache holds {cap} per sequence")
    nkv, d = k_cache.shape[1], k_cache.shape[3]
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(f"{op}: num_heads must be an int, got {type(num_heads).__name__}")
    if nkv == 0 or num_heads <= 0 or num_heads % nkv:
        raise ValueError(
            f"{op}: num_heads={num_heads} must be a positive multiple of the cache's {nkv} kv heads"
        )
    chk.array(op, "w_qkv", w_qkv)
    n = (num_heads + 2 * nkv) * d
    if w_qkv.shape != (n, k):
        raise ValueError(
            f"{op}: w_qkv has {chk.desc(w_qkv)} but must be [{n}, {k}]: (num_heads + 2 * "
            f"kv heads) * head dim = ({num_heads} + 2 * {nkv}) * {d} rows of x's {k} features"
        )
    if w_qkv.dtype is not x.dtype:
        raise TypeError(f"{op}: w_qkv has {chk.desc(w_qkv)} but x has dtype {x.dtype.name}")
    _bias_checks(op, bias, x, n)
    _int32_vector(op, "positions", positions, batch, k_cache)
    _tables(op, cos, sin, rope_style, d, k_cache)
    if cos is None or 2 * cos.shape[1] != d:
        raise ValueError(
            f"{op}: cos and sin must be tables over the whole head [max_pos, {d // 2}], got "
            f"{None if cos is None else chk.desc(cos)}"
        )
    inputs = (x, norm_weight, w_qkv, k_cache, v_cache, positions, cos, sin, bias, residual)
    names = ("x", "norm_weight", "w_qkv", "k_cache", "v_cache", "positions", "cos", "sin")
    for name, a in zip((*names, "bias", "residual"), inputs, strict=True):
        if a is not None and a.device != x.device:
            raise ValueError(f"{op}: x is on {x.device} but {name} is on {a.device}")
    if k_cache is v_cache or shares_elements(k_cache, v_cache):
        raise ValueError(f"{op}: k_cache and v_cache share elements; k and v go to separate caches")
    for cname, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_target(c, f"{op}: {cname}")
        for name, a in zip((*names, "bias", "residual"), inputs, strict=True):
            if a is not None and a is not c and name != cname and shares_elements(c, a):
                raise ValueError(
                    f"{op}: {cname} shares elements with {name}; the launch writes the caches "
                    "while it reads the others"
                )
    fused = decode_gemv(x, w_qkv) and norm_weight.dtype is x.dtype and d % 4 == 0
    # A route naming the op runs it wherever its backend serves the call (the Triton kernel
    # needs D % 4 == 0, the routing table's rule; the error names it otherwise).
    if fused or named_backend(op) is not None:
        params = {"num_heads": num_heads, "eps": e, "rope_style": rope_style}
        return run(op, inputs, params)
    r = rmsnorm_linear(x, norm_weight, w_qkv, bias, eps=e, residual=residual)
    y, h = r if residual is not None else (r, None)
    heads = y.reshape(batch, s, num_heads + 2 * nkv, d)
    q = heads[:, :, :num_heads]
    kt = heads[:, :, num_heads : num_heads + nkv].transpose(0, 2, 1, 3)
    vt = heads[:, :, num_heads + nkv :].transpose(0, 2, 1, 3)
    kv_cache_write(
        k_cache, v_cache, kt, vt, positions, cos=cos, sin=sin, rope_style=rope_style,
        q=q.transpose(0, 2, 1, 3),
    )  # fmt: skip
    return q if h is None else (q, h)
